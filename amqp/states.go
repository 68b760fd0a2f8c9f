package amqp

import "fmt"

// Delivery states and outcomes (part 3, section 3.4).

const (
	codeReceived = 0x23
	codeAccepted = 0x24
	codeRejected = 0x25
	codeReleased = 0x26
	codeModified = 0x27
)

// DeliveryState is the outcome of a delivery: *Accepted, *Rejected,
// *Released or *Modified.
type DeliveryState interface{ outcome() any }

// Accepted: the receiver took the message.
type Accepted struct{}

// Rejected: the message is invalid; Error says why.
type Rejected struct{ Error *Error }

// Released: the message was not processed and may be delivered again.
type Released struct{}

// Modified: like Released, with hints on how to deliver it again.
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations map[Symbol]any
}

func (*Accepted) outcome() any { return describedList(codeAccepted) }
func (s *Rejected) outcome() any {
	return describedList(codeRejected, s.Error.described())
}
func (*Released) outcome() any { return describedList(codeReleased) }
func (s *Modified) outcome() any {
	return describedList(codeModified, s.DeliveryFailed, s.UndeliverableHere, s.MessageAnnotations)
}

// decodeState reads a delivery state; nil stays nil.
func decodeState(v any) (DeliveryState, error) {
	if v == nil {
		return nil, nil
	}
	d, ok := v.(Described)
	if !ok {
		return nil, malformed("delivery state is a %T", v)
	}
	code, _ := d.Descriptor.(uint64)
	l, _ := d.Value.([]any)
	r := &fieldReader{what: "delivery state", f: l}
	switch code {
	case codeAccepted:
		return &Accepted{}, nil
	case codeRejected:
		return &Rejected{Error: r.errorField(0)}, r.err
	case codeReleased:
		return &Released{}, nil
	case codeModified:
		return &Modified{DeliveryFailed: r.boolean(0), UndeliverableHere: r.boolean(1), MessageAnnotations: r.fieldsMap(2)}, r.err
	case codeReceived:
		return nil, nil // not an outcome: the delivery is still in progress
	}
	return nil, malformed("unknown delivery state %v", fmt.Sprint(d.Descriptor))
}
