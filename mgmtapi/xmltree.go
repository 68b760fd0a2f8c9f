package mgmtapi

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Request bodies are read into a small element tree, matched by local
// name: the SDKs put the description elements in the Service Bus
// namespace by a default xmlns or a prefix, and Service Bus reads them
// either way. The reader is strict where XML is dangerous: a DOCTYPE (the
// door to entity expansion, "billion laughs", and external entities) is
// refused outright, entity references other than XML's five predefined
// ones fail (encoding/xml expands no others), and depth and element count
// are bounded on top of the body size limit.

// The namespaces of the descriptions.
const (
	nsAtom       = "http://www.w3.org/2005/Atom"
	nsServiceBus = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	nsInstance   = "http://www.w3.org/2001/XMLSchema-instance"
	nsSchema     = "http://www.w3.org/2001/XMLSchema"
	// nsCounts holds the elements of CountDetails.
	nsCounts = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
)

const (
	maxDepth    = 32
	maxElements = 10000
)

// element is one element of a request body.
type element struct {
	name     xml.Name
	attrs    []xml.Attr
	text     []byte
	children []*element
}

// child is the first child named local, or nil.
func (e *element) child(local string) *element {
	if e == nil {
		return nil
	}
	for _, c := range e.children {
		if c.name.Local == local {
			return c
		}
	}
	return nil
}

// instanceType is the element's i:type attribute without its prefix
// ("SqlFilter" of "d2p1:SqlFilter"), or "".
func (e *element) instanceType() string {
	if e == nil {
		return ""
	}
	for _, a := range e.attrs {
		if a.Name.Local == "type" && (a.Name.Space == nsInstance || a.Name.Space == "") {
			v := a.Value
			if i := strings.LastIndexByte(v, ':'); i >= 0 {
				v = v[i+1:]
			}
			return v
		}
	}
	return ""
}

// errBadXML marks a body that is not XML raftbus reads; the handler
// answers it with 400.
var errBadXML = errors.New("malformed XML")

// parseXML reads body into its root element.
func parseXML(body []byte) (*element, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	var stack []*element
	var root *element
	count := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errBadXML, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			// <!DOCTYPE ...>, <!ENTITY ...>: nothing a description has.
			return nil, fmt.Errorf("%w: a document type declaration (<!%s) is not accepted", errBadXML, firstWord(t))
		case xml.StartElement:
			count++
			if count > maxElements {
				return nil, fmt.Errorf("%w: more than %d elements", errBadXML, maxElements)
			}
			if len(stack) == maxDepth {
				return nil, fmt.Errorf("%w: elements nested deeper than %d", errBadXML, maxDepth)
			}
			e := &element{name: t.Name, attrs: t.Attr}
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				parent.children = append(parent.children, e)
			} else if root != nil {
				return nil, fmt.Errorf("%w: more than one root element", errBadXML)
			} else {
				root = e
			}
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.text = append(top.text, t...)
			} else if len(bytes.TrimSpace(t)) > 0 {
				return nil, fmt.Errorf("%w: text outside the root element", errBadXML)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("%w: no root element", errBadXML)
	}
	return root, nil
}

func firstWord(d xml.Directive) string {
	s := string(d)
	if i := strings.IndexAny(s, " \t\r\n["); i >= 0 {
		s = s[:i]
	}
	return s
}

// xmlWriter writes an answer: elements and escaped text, in the order
// given. Namespaces are declared by the caller as attributes.
type xmlWriter struct {
	b strings.Builder
}

// open writes a start tag with attrs as name, value pairs.
func (w *xmlWriter) open(name string, attrs ...string) { w.tag(name, ">", attrs) }

func (w *xmlWriter) tag(name, end string, attrs []string) {
	w.b.WriteByte('<')
	w.b.WriteString(name)
	for i := 0; i+1 < len(attrs); i += 2 {
		w.b.WriteByte(' ')
		w.b.WriteString(attrs[i])
		w.b.WriteString(`="`)
		xml.EscapeText(&w.b, []byte(attrs[i+1]))
		w.b.WriteByte('"')
	}
	w.b.WriteString(end)
}

func (w *xmlWriter) close(name string) {
	w.b.WriteString("</")
	w.b.WriteString(name)
	w.b.WriteByte('>')
}

// leaf writes <name attrs...>text</name>.
func (w *xmlWriter) leaf(name, text string, attrs ...string) {
	w.open(name, attrs...)
	w.text(text)
	w.close(name)
}

// text writes s as character data: quotes stay as they are (a SQL
// expression reads as written), what XML cannot carry becomes U+FFFD.
func (w *xmlWriter) text(s string) {
	for _, r := range s {
		switch {
		case r == '&':
			w.b.WriteString("&amp;")
		case r == '<':
			w.b.WriteString("&lt;")
		case r == '>':
			w.b.WriteString("&gt;")
		case r == '\r':
			w.b.WriteString("&#xD;")
		case r == '\t' || r == '\n' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF:
			w.b.WriteRune(r)
		default:
			w.b.WriteRune('\uFFFD')
		}
	}
}

// empty writes <name attrs.../>.
func (w *xmlWriter) empty(name string, attrs ...string) { w.tag(name, "/>", attrs) }

func (w *xmlWriter) String() string { return w.b.String() }

// value is the element's text ("" for no element).
func (e *element) value() string {
	if e == nil {
		return ""
	}
	return string(e.text)
}
