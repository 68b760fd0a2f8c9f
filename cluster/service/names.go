package service

// CheckEntityName refuses, with INVALID_ARGUMENT, a queue or topic name
// the admin service would refuse: for front doors that read names from
// elsewhere than a request message (a URL path) and answer a bad one
// before anything is looked up.
func CheckEntityName(kind, name string) error { return checkEntityName(kind, name) }

// CheckChildName is CheckEntityName for a subscription or rule name.
func CheckChildName(kind, name string) error { return checkChildName(kind, name) }
