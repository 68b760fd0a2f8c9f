package mgmtapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Answers are Atom entries (one entity) and feeds (a page of a list),
// each entity's description in the entry's content, as Service Bus
// writes them.

// entry is one entity of an answer.
type entry struct {
	// path is the entity's path under the namespace ("orders",
	// "events/Subscriptions/audit").
	path             string
	title            string
	created, updated *timestamppb.Timestamp
	content          func(w *xmlWriter)
}

// link is the URL of path with the request's api-version and query.
func (rq *request) link(path string, query url.Values) string {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("api-version", string(rq.version))
	return rq.base + "/" + path + "?" + q.Encode()
}

// writeEntryBody writes e's entry element; top is whether it is the
// document (declaring the Atom namespace) or inside a feed.
func (rq *request) writeEntryBody(w *xmlWriter, e entry, top bool) {
	if top {
		w.open("entry", "xmlns", nsAtom)
	} else {
		w.open("entry")
	}
	self := rq.link(e.path, nil)
	w.leaf("id", self)
	w.leaf("title", e.title, "type", "text")
	w.leaf("published", formatTime(timeOf(e.created)))
	w.leaf("updated", formatTime(timeOf(e.updated)))
	w.open("author")
	w.leaf("name", namespaceName(rq.host))
	w.close("author")
	w.empty("link", "rel", "self", "href", self)
	w.open("content", "type", "application/xml")
	e.content(w)
	w.close("content")
	w.close("entry")
}

// answerEntry answers one entity with status (201 for a create).
func (rq *request) answerEntry(status int, e entry) error {
	var w xmlWriter
	w.b.WriteString(`<?xml version="1.0" encoding="utf-8"?>`)
	rq.writeEntryBody(&w, e, true)
	rq.answer(status, "application/atom+xml;type=entry;charset=utf-8", w.String())
	return nil
}

// answerFeed answers a page of a list: entries from $skip, with a next
// link when more follow (the SDKs page by it).
func (rq *request) answerFeed(title, path string, p page, more bool, entries []entry) error {
	var w xmlWriter
	w.b.WriteString(`<?xml version="1.0" encoding="utf-8"?>`)
	w.open("feed", "xmlns", nsAtom)
	self := rq.link(path, url.Values{"$skip": {strconv.Itoa(p.skip)}, "$top": {strconv.Itoa(p.top)}})
	w.leaf("title", title, "type", "text")
	w.leaf("id", self)
	w.leaf("updated", formatTime(time.Now()))
	w.empty("link", "rel", "self", "href", self)
	if more {
		next := rq.link(path, url.Values{"$skip": {strconv.Itoa(p.skip + p.top)}, "$top": {strconv.Itoa(p.top)}})
		w.empty("link", "rel", "next", "href", next)
	}
	for _, e := range entries {
		rq.writeEntryBody(&w, e, false)
	}
	w.close("feed")
	rq.answer(http.StatusOK, "application/atom+xml;type=feed;charset=utf-8", w.String())
	return nil
}

func (rq *request) answer(status int, contentType, body string) {
	rq.w.Header().Set("Content-Type", contentType)
	rq.w.WriteHeader(status)
	fmt.Fprint(rq.w, body)
}

// page is a list request's $skip and $top.
type page struct{ skip, top int }

// defaultTop is the page size of a list request without $top, Service
// Bus's.
const defaultTop = 100

func (rq *request) page() (page, error) {
	p := page{top: defaultTop}
	q := rq.r.URL.Query()
	for _, f := range []struct {
		name string
		v    *int
	}{{"$skip", &p.skip}, {"$top", &p.top}} {
		s := q.Get(f.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return page{}, badRequest("%s must be a whole number, not %q", f.name, s)
		}
		*f.v = n
	}
	if p.top == 0 {
		p.top = defaultTop
	}
	return p, nil
}

// listPage is the items of p from a list the admin service pages with
// tokens, and whether more follow.
func listPage[T any](p page, list func(token string) ([]T, string, error)) ([]T, bool, error) {
	var all []T
	token := ""
	for {
		items, next, err := list(token)
		if err != nil {
			return nil, false, err
		}
		all = append(all, items...)
		if next == "" || len(all) > p.skip+p.top {
			break
		}
		token = next
	}
	if p.skip >= len(all) {
		return nil, false, nil
	}
	end := min(len(all), p.skip+p.top)
	return all[p.skip:end], len(all) > end, nil
}
