package mgmtapi

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// The entity model of this API is the gRPC API's: a QueueDescription is
// a raftbus.v1.QueueProperties plus the queue's RuntimeProperties, and
// so on. The tables below are the one mapping between the description
// elements and the proto fields; a field added to a proto message gets
// its element here (TestEveryPropertyHasAnElement says which are
// missing), and the reading, writing, validation and the answers of
// every operation follow from the row.
//
// Rows are in the order Service Bus writes the elements, which is the
// order its own older clients require in requests.

// apiVersion is a request's api-version: the SDKs send 2017-04, 2021-05
// or (Go's) 2024-05; answers follow the version asked for.
type apiVersion string

// defaultVersion answers a request without an api-version.
const defaultVersion apiVersion = "2017-04"

var versionForm = regexp.MustCompile(`^\d{4}-\d{2}(-\d{2})?(-preview)?$`)

func (v apiVersion) before(other string) bool { return string(v) < other }

// property is one element of a description.
type property struct {
	element string
	// field is the proto field the element carries ("" for an element
	// with none: a fixed value or a runtime count).
	field protoreflect.Name
	// ref: the field names an entity; answers write it as the entity's
	// sb:// URI, as Service Bus does, and requests may send either.
	ref bool
	// readOnly: the broker sets the field (created_at); a request's
	// value is ignored, as Service Bus ignores it.
	readOnly bool
	// since is the first api-version that has the element ("" all).
	since string
	// write, for an element without a field, writes it; nil writes
	// nothing.
	write func(w *xmlWriter, d *description)
	// read, for an element without a field or one read by code, takes a
	// request's element into settings; nil ignores it (runtime counts).
	read func(e *element, settings protoreflect.Message) error
}

// description is what an answer describes: an entity's settings, its
// counts (nil for rules and in answers that have none) and what its
// URIs are written with.
type description struct {
	settings protoreflect.Message
	runtime  *raftbusv1.RuntimeProperties
	// host is the namespace's host as the client named it, for the
	// sb:// URIs of the entities a setting names.
	host    string
	version apiVersion
}

func setting(element string, field protoreflect.Name) property {
	return property{element: element, field: field}
}

func entityRef(element string, field protoreflect.Name) property {
	return property{element: element, field: field, ref: true}
}

func brokerSet(element string, field protoreflect.Name) property {
	return property{element: element, field: field, readOnly: true}
}

// fixed is an element whose value raftbus always has: a request may
// send that value only (a setting is honoured or refused, never stored
// and ignored).
func fixed(name, value string) property {
	return property{element: name,
		write: func(w *xmlWriter, _ *description) { w.leaf(name, value) },
		read: func(e *element, _ protoreflect.Message) error {
			got := strings.TrimSpace(e.value())
			if b, err := parseBool(value); err == nil {
				if g, err := parseBool(got); err == nil && g == b {
					return nil
				}
			} else if strings.EqualFold(got, value) {
				return nil
			}
			return fmt.Errorf("%s must be %s: raftbus has no other (not %q)", name, value, got)
		}}
}

// unsupported is an element raftbus has no setting for: a request may
// send it empty only, and answers leave it out.
func unsupported(name, why string) property {
	return property{element: name,
		read: func(e *element, _ protoreflect.Message) error {
			if strings.TrimSpace(e.value()) != "" || len(e.children) > 0 {
				return fmt.Errorf("%s is not supported: %s", name, why)
			}
			return nil
		}}
}

// count is a runtime count, written when the answer has counts.
func count(element string, get func(*raftbusv1.RuntimeProperties) int64) property {
	return property{element: element, write: func(w *xmlWriter, d *description) {
		if d.runtime != nil {
			w.leaf(element, strconv.FormatInt(get(d.runtime), 10))
		}
	}}
}

// accessedAt is the last time the entity was used, as far as the
// counts tell (never: the zero time, as Service Bus writes it).
var accessedAt = property{element: "AccessedAt", write: func(w *xmlWriter, d *description) {
	if d.runtime != nil {
		w.leaf("AccessedAt", formatTime(timeOf(d.runtime.GetAccessedAt())))
	}
}}

// countDetails are the message counts by sub-queue, in their own
// namespace.
var countDetails = property{element: "CountDetails", write: func(w *xmlWriter, d *description) {
	rt := d.runtime
	if rt == nil {
		return
	}
	w.open("CountDetails", "xmlns:d2p1", nsCounts)
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"ActiveMessageCount", rt.GetActiveMessageCount()},
		{"DeadLetterMessageCount", rt.GetDeadLetterMessageCount()},
		{"ScheduledMessageCount", rt.GetScheduledMessageCount()},
		{"TransferMessageCount", rt.GetTransferMessageCount()},
		// A forward that cannot be delivered stays in transfer until
		// its target takes it: raftbus has no transfer dead-letter queue.
		{"TransferDeadLetterMessageCount", 0},
	} {
		w.leaf("d2p1:"+c.name, strconv.FormatInt(c.n, 10))
	}
	w.close("CountDetails")
}}

// partitionedCount is the partition count of an entity created with
// EnablePartitioning: Service Bus's for a partitioned entity, and
// raftbus's most.
const partitionedCount = 16

// enablePartitioning is partition_count as Service Bus has it, a yes or
// no: true creates 16 partitions, false one, and without the element
// the server's default applies. Fixed at creation, as the count is.
var enablePartitioning = property{element: "EnablePartitioning", field: "partition_count",
	write: func(w *xmlWriter, d *description) {
		fd := d.settings.Descriptor().Fields().ByName("partition_count")
		w.leaf("EnablePartitioning", formatBool(d.settings.Get(fd).Uint() > 1))
	},
	read: func(e *element, m protoreflect.Message) error {
		on, err := parseBool(e.value())
		if err != nil {
			return fmt.Errorf("EnablePartitioning: %v", err)
		}
		n := uint32(1)
		if on {
			n = partitionedCount
		}
		m.Set(m.Descriptor().Fields().ByName("partition_count"), protoreflect.ValueOfUint32(n))
		return nil
	}}

// Elements every entity description has with the same meaning.
var (
	notAnonymous = fixed("IsAnonymousAccessible", "false")
	// Entity-level access policies are managed through the access API;
	// a description carries none.
	noAuthorizationRules = property{element: "AuthorizationRules",
		write: func(w *xmlWriter, _ *description) { w.empty("AuthorizationRules") },
		read: func(e *element, _ protoreflect.Message) error {
			if len(e.children) > 0 {
				return fmt.Errorf("AuthorizationRules are not supported here: create access policies with the access API (raftbus auth)")
			}
			return nil
		}}
	active     = fixed("Status", "Active")
	available  = fixed("EntityAvailabilityStatus", "Available")
	notExpress = fixed("EnableExpress", "false")
	noMetadata = unsupported("UserMetadata", "raftbus keeps no user metadata with an entity")
)

var queueProperties = []property{
	setting("LockDuration", "lock_duration"),
	setting("MaxSizeInMegabytes", "max_size_in_megabytes"),
	setting("RequiresDuplicateDetection", "requires_duplicate_detection"),
	setting("RequiresSession", "requires_session"),
	setting("DefaultMessageTimeToLive", "default_message_time_to_live"),
	setting("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration"),
	setting("DuplicateDetectionHistoryTimeWindow", "duplicate_detection_history_time_window"),
	setting("MaxDeliveryCount", "max_delivery_count"),
	setting("EnableBatchedOperations", "enable_batched_operations"),
	count("SizeInBytes", (*raftbusv1.RuntimeProperties).GetSizeInBytes),
	count("MessageCount", (*raftbusv1.RuntimeProperties).GetTotalMessageCount),
	notAnonymous,
	noAuthorizationRules,
	active,
	entityRef("ForwardTo", "forward_to"),
	brokerSet("CreatedAt", "created_at"),
	brokerSet("UpdatedAt", "updated_at"),
	accessedAt,
	// A queue keeps order per partition whatever is asked.
	{element: "SupportOrdering", write: func(w *xmlWriter, _ *description) { w.leaf("SupportOrdering", "true") }},
	countDetails,
	setting("AutoDeleteOnIdle", "auto_delete_on_idle"),
	enablePartitioning,
	available,
	notExpress,
	entityRef("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to"),
	noMetadata,
	{element: "MaxMessageSizeInKilobytes", field: "max_message_size_in_kilobytes", since: "2021-05"},
}

var topicProperties = []property{
	setting("DefaultMessageTimeToLive", "default_message_time_to_live"),
	setting("MaxSizeInMegabytes", "max_size_in_megabytes"),
	setting("RequiresDuplicateDetection", "requires_duplicate_detection"),
	setting("DuplicateDetectionHistoryTimeWindow", "duplicate_detection_history_time_window"),
	setting("EnableBatchedOperations", "enable_batched_operations"),
	count("SizeInBytes", (*raftbusv1.RuntimeProperties).GetSizeInBytes),
	fixed("FilteringMessagesBeforePublishing", "false"),
	notAnonymous,
	noAuthorizationRules,
	active,
	brokerSet("CreatedAt", "created_at"),
	brokerSet("UpdatedAt", "updated_at"),
	accessedAt,
	setting("SupportOrdering", "support_ordering"),
	countDetails,
	count("SubscriptionCount", func(rt *raftbusv1.RuntimeProperties) int64 { return int64(rt.GetSubscriptionCount()) }),
	setting("AutoDeleteOnIdle", "auto_delete_on_idle"),
	enablePartitioning,
	available,
	fixed("EnableSubscriptionPartitioning", "false"),
	notExpress,
	noMetadata,
	{element: "MaxMessageSizeInKilobytes", field: "max_message_size_in_kilobytes", since: "2021-05"},
}

var subscriptionProperties = []property{
	setting("LockDuration", "lock_duration"),
	setting("RequiresSession", "requires_session"),
	setting("DefaultMessageTimeToLive", "default_message_time_to_live"),
	setting("DeadLetteringOnMessageExpiration", "dead_lettering_on_message_expiration"),
	setting("DeadLetteringOnFilterEvaluationExceptions", "dead_lettering_on_filter_evaluation_exceptions"),
	count("MessageCount", (*raftbusv1.RuntimeProperties).GetTotalMessageCount),
	setting("MaxDeliveryCount", "max_delivery_count"),
	setting("EnableBatchedOperations", "enable_batched_operations"),
	active,
	entityRef("ForwardTo", "forward_to"),
	brokerSet("CreatedAt", "created_at"),
	brokerSet("UpdatedAt", "updated_at"),
	accessedAt,
	countDetails,
	noMetadata,
	entityRef("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to"),
	setting("AutoDeleteOnIdle", "auto_delete_on_idle"),
	available,
}

// correlationProperties are a correlation filter's system properties;
// its application properties are the Properties list (rules.go).
var correlationProperties = []property{
	setting("CorrelationId", "correlation_id"),
	setting("MessageId", "message_id"),
	setting("To", "to"),
	setting("ReplyTo", "reply_to"),
	setting("Label", "subject"),
	setting("SessionId", "session_id"),
	setting("ReplyToSessionId", "reply_to_session_id"),
	setting("ContentType", "content_type"),
}

// writeDescription writes a description element of table's kind.
func writeDescription(w *xmlWriter, name string, table []property, d *description) {
	w.open(name, "xmlns", nsServiceBus, "xmlns:i", nsInstance)
	writeProperties(w, table, d)
	w.close(name)
}

// writeProperties writes d's elements of table, in its order.
func writeProperties(w *xmlWriter, table []property, d *description) {
	for _, p := range table {
		if p.since != "" && d.version.before(p.since) {
			continue
		}
		if p.write != nil {
			p.write(w, d)
			continue
		}
		if p.field == "" {
			continue
		}
		fd := d.settings.Descriptor().Fields().ByName(p.field)
		if !d.settings.Has(fd) {
			continue
		}
		text := formatField(fd, d.settings.Get(fd))
		if p.ref {
			text = entityURI(d.host, text)
		}
		w.leaf(p.element, text)
	}
}

// readProperties takes the elements of a request's description into
// settings: each element of table, by its local name; other elements are
// ignored, as Service Bus ignores elements it does not know.
func readProperties(table []property, desc *element, settings protoreflect.Message) error {
	byName := make(map[string]property, len(table))
	for _, p := range table {
		byName[p.element] = p
	}
	for _, e := range desc.children {
		p, ok := byName[e.name.Local]
		if !ok || p.readOnly {
			continue
		}
		if p.read != nil {
			if err := p.read(e, settings); err != nil {
				return err
			}
			continue
		}
		if p.field == "" {
			continue // a count: the broker's to say
		}
		fd := settings.Descriptor().Fields().ByName(p.field)
		text := e.value()
		if p.ref {
			text = entityName(text)
		}
		v, err := parseField(fd, text)
		if err != nil {
			return fmt.Errorf("%s: %v", p.element, err)
		}
		if v.IsValid() {
			settings.Set(fd, v)
		}
	}
	return nil
}

// formatField writes a field's value as its xsd type.
func formatField(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return formatBool(v.Bool())
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return strconv.FormatInt(v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return strconv.FormatUint(v.Uint(), 10)
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.MessageKind:
		switch m := v.Message().Interface().(type) {
		case *durationpb.Duration:
			return formatDuration(m.AsDuration())
		case *timestamppb.Timestamp:
			return formatTime(m.AsTime())
		}
	}
	panic(fmt.Sprintf("mgmtapi: no XML form for field %s", fd.FullName()))
}

// parseField reads a field's value from its xsd form; an invalid Value
// (for an empty string) leaves the field unset.
func parseField(fd protoreflect.FieldDescriptor, text string) (protoreflect.Value, error) {
	t := strings.TrimSpace(text)
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, err := parseBool(t)
		return protoreflect.ValueOfBool(b), err
	case protoreflect.Int32Kind:
		n, err := strconv.ParseInt(t, 10, 32)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("%q is not a 32-bit integer", t)
		}
		return protoreflect.ValueOfInt32(int32(n)), nil
	case protoreflect.Int64Kind:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("%q is not an integer", t)
		}
		return protoreflect.ValueOfInt64(n), nil
	case protoreflect.Uint32Kind:
		n, err := strconv.ParseUint(t, 10, 32)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("%q is not a 32-bit unsigned integer", t)
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil
	case protoreflect.StringKind:
		if text == "" {
			return protoreflect.Value{}, nil
		}
		return protoreflect.ValueOfString(text), nil
	case protoreflect.MessageKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Duration":
			d, err := parseDuration(t)
			if err != nil {
				return protoreflect.Value{}, err
			}
			return protoreflect.ValueOfMessage(durationpb.New(d).ProtoReflect()), nil
		case "google.protobuf.Timestamp":
			ts, err := parseTime(t)
			if err != nil {
				return protoreflect.Value{}, err
			}
			return protoreflect.ValueOfMessage(timestamppb.New(ts).ProtoReflect()), nil
		}
	}
	panic(fmt.Sprintf("mgmtapi: no XML form for field %s", fd.FullName()))
}

// entityURI is the sb:// URI of entity name in the namespace at host.
func entityURI(host, name string) string {
	if name == "" || strings.Contains(name, "://") {
		return name
	}
	return "sb://" + host + "/" + name
}

// entityName is the entity a ForwardTo names: a name, or a URI of the
// namespace (the SDKs send sb://host/name). The host is not compared:
// a cluster is reached at many addresses.
func entityName(ref string) string {
	ref = strings.TrimSpace(ref)
	if _, rest, ok := strings.Cut(ref, "://"); ok {
		_, path, _ := strings.Cut(rest, "/")
		return strings.Trim(path, "/")
	}
	return ref
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
