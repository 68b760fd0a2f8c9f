package amqp

// The performatives of the AMQP 1.0 transport (part 2, section 2.7), with
// the fields this engine reads and writes. Fields the engine has no use
// for are dropped on decode and written as null.

const (
	codeOpen        = 0x10
	codeBegin       = 0x11
	codeAttach      = 0x12
	codeFlow        = 0x13
	codeTransfer    = 0x14
	codeDisposition = 0x15
	codeDetach      = 0x16
	codeEnd         = 0x17
	codeClose       = 0x18
	codeSource      = 0x28
	codeTarget      = 0x29
)

// Link roles and settle modes as on the wire.
const (
	roleSender   = false
	roleReceiver = true

	// SenderSettleMode values.
	SenderSettleUnsettled uint8 = 0
	SenderSettleSettled   uint8 = 1
	SenderSettleMixed     uint8 = 2
	// ReceiverSettleMode values.
	ReceiverSettleFirst  uint8 = 0
	ReceiverSettleSecond uint8 = 1
)

type performative interface{ described() any }

type open struct {
	ContainerID  string
	Hostname     string
	MaxFrameSize uint32
	ChannelMax   uint16
	IdleTimeout  uint32 // milliseconds, 0: none
	Properties   map[Symbol]any
}

func (p *open) described() any {
	var idle any
	if p.IdleTimeout > 0 {
		idle = p.IdleTimeout
	}
	return describedList(codeOpen, p.ContainerID, nilIfEmpty(p.Hostname), p.MaxFrameSize, p.ChannelMax, idle,
		nil, nil, nil, nil, p.Properties)
}

func decodeOpen(r *fieldReader) (*open, error) {
	p := &open{ContainerID: r.str(0), Hostname: r.str(1), MaxFrameSize: r.u32(2, ^uint32(0)),
		ChannelMax: r.u16(3, ^uint16(0)), IdleTimeout: r.u32(4, 0), Properties: r.fieldsMap(9)}
	return p, r.err
}

type begin struct {
	RemoteChannel  *uint16
	NextOutgoingID uint32
	IncomingWindow uint32
	OutgoingWindow uint32
	HandleMax      uint32
}

func (p *begin) described() any {
	var rc any
	if p.RemoteChannel != nil {
		rc = *p.RemoteChannel
	}
	return describedList(codeBegin, rc, p.NextOutgoingID, p.IncomingWindow, p.OutgoingWindow, p.HandleMax)
}

func decodeBegin(r *fieldReader) (*begin, error) {
	p := &begin{NextOutgoingID: r.u32(1, 0), IncomingWindow: r.u32(2, 0), OutgoingWindow: r.u32(3, 0), HandleMax: r.u32(4, ^uint32(0))}
	if r.present(0) {
		c := r.u16(0, 0)
		p.RemoteChannel = &c
	}
	return p, r.err
}

// Source is a link's source terminus. Raw keeps the fields as received, so
// that an attach reply echoes what this engine does not interpret.
type Source struct {
	Address string
	// Filter is the filter set: filter name to described filter.
	Filter map[Symbol]any
	Raw    []any
}

// Target is a link's target terminus.
type Target struct {
	Address string
	Raw     []any
	// Coordinator: the target is a transaction coordinator (part 4,
	// section 4.5.1), which a link attaches to declare transactions.
	Coordinator bool
}

// codeCoordinator is the descriptor of a coordinator target.
const codeCoordinator = 0x30

func isCoordinator(v any) bool {
	d, ok := v.(Described)
	if !ok {
		return false
	}
	switch c := d.Descriptor.(type) {
	case uint64:
		return c == codeCoordinator
	case Symbol:
		return c == "amqp:coordinator:list"
	}
	return false
}

func decodeSource(v any) (*Source, error) {
	if v == nil {
		return nil, nil
	}
	r, err := composite(v, codeSource, "source")
	if err != nil {
		return nil, err
	}
	s := &Source{Address: r.str(0), Filter: r.fieldsMap(7), Raw: r.f}
	return s, r.err
}

func (s *Source) described() any {
	if s == nil {
		return nil
	}
	f := make([]any, max(len(s.Raw), 8))
	copy(f, s.Raw)
	f[0] = s.Address
	f[7] = nil
	if s.Filter != nil {
		f[7] = s.Filter
	}
	return describedList(codeSource, f...)
}

func decodeTarget(v any) (*Target, error) {
	if v == nil {
		return nil, nil
	}
	if isCoordinator(v) {
		return &Target{Coordinator: true}, nil
	}
	r, err := composite(v, codeTarget, "target")
	if err != nil {
		return nil, err
	}
	t := &Target{Address: r.str(0), Raw: r.f}
	return t, r.err
}

func (t *Target) described() any {
	if t == nil {
		return nil
	}
	f := make([]any, max(len(t.Raw), 1))
	copy(f, t.Raw)
	f[0] = t.Address
	return describedList(codeTarget, f...)
}

type attach struct {
	Name                 string
	Handle               uint32
	Role                 bool
	SndSettleMode        uint8
	RcvSettleMode        uint8
	Source               *Source
	Target               *Target
	InitialDeliveryCount uint32
	MaxMessageSize       uint64
	Properties           map[Symbol]any
}

func (p *attach) described() any {
	var idc any
	if p.Role == roleSender {
		idc = p.InitialDeliveryCount
	}
	var src, tgt any
	if p.Source != nil {
		src = p.Source.described()
	}
	if p.Target != nil {
		tgt = p.Target.described()
	}
	var mms any
	if p.MaxMessageSize > 0 {
		mms = p.MaxMessageSize
	}
	return describedList(codeAttach, p.Name, p.Handle, p.Role, p.SndSettleMode, p.RcvSettleMode, src, tgt,
		nil, nil, idc, mms, nil, nil, p.Properties)
}

func decodeAttach(r *fieldReader) (*attach, error) {
	p := &attach{Name: r.str(0), Handle: r.u32(1, 0), Role: r.boolean(2), SndSettleMode: r.u8(3, SenderSettleMixed),
		RcvSettleMode: r.u8(4, ReceiverSettleFirst), InitialDeliveryCount: r.u32(9, 0), MaxMessageSize: r.u64(10, 0),
		Properties: r.fieldsMap(13)}
	if r.err != nil {
		return nil, r.err
	}
	var err error
	if p.Source, err = decodeSource(r.get(5)); err != nil {
		return nil, err
	}
	if p.Target, err = decodeTarget(r.get(6)); err != nil {
		return nil, err
	}
	return p, nil
}

type flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32
	NextOutgoingID uint32
	OutgoingWindow uint32
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
}

func optU32(p *uint32) any {
	if p == nil {
		return nil
	}
	return *p
}

func (p *flow) described() any {
	return describedList(codeFlow, optU32(p.NextIncomingID), p.IncomingWindow, p.NextOutgoingID, p.OutgoingWindow,
		optU32(p.Handle), optU32(p.DeliveryCount), optU32(p.LinkCredit), optU32(p.Available), p.Drain, p.Echo)
}

func decodeFlow(r *fieldReader) (*flow, error) {
	opt := func(i int) *uint32 {
		if !r.present(i) {
			return nil
		}
		v := r.u32(i, 0)
		return &v
	}
	p := &flow{NextIncomingID: opt(0), IncomingWindow: r.u32(1, 0), NextOutgoingID: r.u32(2, 0), OutgoingWindow: r.u32(3, 0),
		Handle: opt(4), DeliveryCount: opt(5), LinkCredit: opt(6), Available: opt(7), Drain: r.boolean(8), Echo: r.boolean(9)}
	return p, r.err
}

type transfer struct {
	Handle        uint32
	DeliveryID    *uint32
	DeliveryTag   []byte
	MessageFormat *uint32
	Settled       bool
	More          bool
	State         any
	Aborted       bool
	Payload       []byte // not a field: the frame's bytes after the performative
}

func (p *transfer) described() any {
	return describedList(codeTransfer, p.Handle, optU32(p.DeliveryID), p.DeliveryTag, optU32(p.MessageFormat), p.Settled, p.More,
		nil, p.State, nil, p.Aborted)
}

func decodeTransfer(r *fieldReader) (*transfer, error) {
	p := &transfer{Handle: r.u32(0, 0), DeliveryTag: r.binary(2), Settled: r.boolean(4), More: r.boolean(5),
		State: r.get(7), Aborted: r.boolean(9)}
	if r.present(1) {
		v := r.u32(1, 0)
		p.DeliveryID = &v
	}
	if r.present(3) {
		v := r.u32(3, 0)
		p.MessageFormat = &v
	}
	return p, r.err
}

type disposition struct {
	Role    bool
	First   uint32
	Last    *uint32
	Settled bool
	State   any
}

func (p *disposition) described() any {
	return describedList(codeDisposition, p.Role, p.First, optU32(p.Last), p.Settled, p.State)
}

func decodeDisposition(r *fieldReader) (*disposition, error) {
	p := &disposition{Role: r.boolean(0), First: r.u32(1, 0), Settled: r.boolean(3), State: r.get(4)}
	if r.present(2) {
		v := r.u32(2, 0)
		p.Last = &v
	}
	return p, r.err
}

type detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

func (p *detach) described() any {
	return describedList(codeDetach, p.Handle, p.Closed, p.Error.described())
}

func decodeDetach(r *fieldReader) (*detach, error) {
	p := &detach{Handle: r.u32(0, 0), Closed: r.boolean(1), Error: r.errorField(2)}
	return p, r.err
}

type end struct{ Error *Error }

func (p *end) described() any { return describedList(codeEnd, p.Error.described()) }

type closePerf struct{ Error *Error }

func (p *closePerf) described() any { return describedList(codeClose, p.Error.described()) }

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// decodePerformative decodes a frame body of the AMQP frame type.
func decodePerformative(body []byte) (any, error) {
	v, n, err := Unmarshal(body)
	if err != nil {
		return nil, err
	}
	d, ok := v.(Described)
	if !ok {
		return nil, malformed("frame body is a %T, not a performative", v)
	}
	code, ok := d.Descriptor.(uint64)
	if !ok {
		return nil, malformed("performative descriptor %v", d.Descriptor)
	}
	l, ok := d.Value.([]any)
	if !ok {
		return nil, malformed("performative %#x is a described %T", code, d.Value)
	}
	r := &fieldReader{f: l}
	switch code {
	case codeOpen:
		r.what = "open"
		return decodeOpen(r)
	case codeBegin:
		r.what = "begin"
		return decodeBegin(r)
	case codeAttach:
		r.what = "attach"
		return decodeAttach(r)
	case codeFlow:
		r.what = "flow"
		return decodeFlow(r)
	case codeTransfer:
		r.what = "transfer"
		t, err := decodeTransfer(r)
		if err != nil {
			return nil, err
		}
		t.Payload = body[n:]
		return t, nil
	case codeDisposition:
		r.what = "disposition"
		return decodeDisposition(r)
	case codeDetach:
		r.what = "detach"
		return decodeDetach(r)
	case codeEnd:
		r.what = "end"
		return &end{Error: r.errorField(0)}, r.err
	case codeClose:
		r.what = "close"
		return &closePerf{Error: r.errorField(0)}, r.err
	}
	return nil, malformed("unknown performative %#x", code)
}
