package admin

import "google.golang.org/protobuf/proto"

// clone copies props so that setting the name does not change the
// caller's value; nil yields empty.
func clone[T proto.Message](props T, empty T) T {
	if any(props) == nil || !props.ProtoReflect().IsValid() {
		return empty
	}
	return proto.Clone(props).(T)
}
