package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/raftbus/raftbus/client"
	"github.com/raftbus/raftbus/internal/sas"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// pageSize is how many messages a messages page shows.
const pageSize = 20

var funcs = template.FuncMap{
	"trim": func(prefix string, v fmt.Stringer) string {
		return strings.ToLower(strings.TrimPrefix(v.String(), prefix))
	},
	"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"query": func(v ...string) template.URL { return template.URL(queryOf(v...)) },
	// token is a fresh token for a form that must act once.
	"token": newToken,
}

func keyNameOf(connectionString string) string {
	cs, err := sas.ParseConnectionString(connectionString)
	if err != nil {
		return ""
	}
	return cs.KeyName
}

func queryOf(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q.Encode()
}

func (c *console) clusterPage(rq *request) error {
	info, err := rq.admin.GetClusterInfo(rq.ctx)
	if err != nil {
		return err
	}
	c.render(rq.w, "cluster", rq.session, map[string]any{"Info": info, "Page": "cluster"})
	return nil
}

// clusterJSON feeds the live figures of the cluster page: per node the
// messages its partitions' leaders counted, read twice by the page to
// draw rates.
func (c *console) clusterJSON(rq *request) error {
	info, err := rq.admin.GetClusterInfo(rq.ctx)
	if err != nil {
		return err
	}
	type node struct {
		ID        string `json:"id"`
		Sent      uint64 `json:"sent"`
		Completed uint64 `json:"completed"`
	}
	out := struct {
		At    int64  `json:"at"`
		Nodes []node `json:"nodes"`
	}{At: time.Now().UnixMilli()}
	for _, n := range info.GetNodes() {
		out.Nodes = append(out.Nodes, node{ID: n.GetNodeId(), Sent: n.GetMessages().GetSent(), Completed: n.GetMessages().GetCompleted()})
	}
	rq.w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(rq.w).Encode(out)
}

// entityRow is one queue or subscription in the entities page.
type entityRow struct {
	Path     string
	Kind     string
	Counts   *raftbusv1.RuntimeProperties
	Error    string
	Settings string
}

func (c *console) entitiesPage(rq *request) error {
	var rows []entityRow
	queues, err := rq.admin.ListQueues(rq.ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		row := entityRow{Path: q.GetName(), Kind: "queue", Settings: settingsOf(q)}
		if rt, err := rq.admin.GetQueueRuntimeProperties(rq.ctx, q.GetName()); err != nil {
			row.Error = err.Error()
		} else {
			row.Counts = rt
		}
		rows = append(rows, row)
	}
	topics, err := rq.admin.ListTopics(rq.ctx)
	if err != nil {
		return err
	}
	for _, t := range topics {
		rows = append(rows, entityRow{Path: t.GetName(), Kind: "topic", Settings: settingsOf(t)})
		subs, err := rq.admin.ListSubscriptions(rq.ctx, t.GetName())
		if err != nil {
			return err
		}
		for _, s := range subs {
			row := entityRow{Path: t.GetName() + "/subscriptions/" + s.GetSubscriptionName(), Kind: "subscription", Settings: settingsOf(s)}
			if rt, err := rq.admin.GetSubscriptionRuntimeProperties(rq.ctx, t.GetName(), s.GetSubscriptionName()); err != nil {
				row.Error = err.Error()
			} else {
				row.Counts = rt
			}
			rows = append(rows, row)
		}
	}
	c.render(rq.w, "entities", rq.session, map[string]any{"Rows": rows, "Page": "entities"})
	return nil
}

// settingsOf is an entity's main settings in one line.
func settingsOf(m proto.Message) string {
	var parts []string
	add := func(ok bool, format string, args ...any) {
		if ok {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	switch p := m.(type) {
	case *raftbusv1.QueueProperties:
		add(true, "partitions %d", p.GetPartitionCount())
		add(true, "lock %v", p.GetLockDuration().AsDuration())
		add(true, "max deliveries %d", p.GetMaxDeliveryCount())
		add(true, "time to live %s", lifetime(p.GetDefaultMessageTimeToLive()))
		add(p.GetRequiresSession(), "sessions")
		add(p.GetRequiresDuplicateDetection(), "duplicate detection")
		add(p.GetForwardTo() != "", "forwards to %s", p.GetForwardTo())
		add(p.GetForwardDeadLetteredMessagesTo() != "", "dead letters to %s", p.GetForwardDeadLetteredMessagesTo())
		add(lifetime(p.GetAutoDeleteOnIdle()) != "unlimited", "deleted after %s idle", lifetime(p.GetAutoDeleteOnIdle()))
	case *raftbusv1.TopicProperties:
		add(true, "partitions %d", p.GetPartitionCount())
		add(true, "time to live %s", lifetime(p.GetDefaultMessageTimeToLive()))
		add(p.GetRequiresDuplicateDetection(), "duplicate detection")
		add(lifetime(p.GetAutoDeleteOnIdle()) != "unlimited", "deleted after %s idle", lifetime(p.GetAutoDeleteOnIdle()))
	case *raftbusv1.SubscriptionProperties:
		add(true, "lock %v", p.GetLockDuration().AsDuration())
		add(true, "max deliveries %d", p.GetMaxDeliveryCount())
		add(true, "time to live %s", lifetime(p.GetDefaultMessageTimeToLive()))
		add(p.GetRequiresSession(), "sessions")
		add(p.GetForwardTo() != "", "forwards to %s", p.GetForwardTo())
		add(p.GetForwardDeadLetteredMessagesTo() != "", "dead letters to %s", p.GetForwardDeadLetteredMessagesTo())
		add(lifetime(p.GetAutoDeleteOnIdle()) != "unlimited", "deleted after %s idle", lifetime(p.GetAutoDeleteOnIdle()))
	}
	return strings.Join(parts, " · ")
}

// lifetime is a time to live, "unlimited" for the longest duration (the
// default).
func lifetime(d *durationpb.Duration) string {
	if d == nil || d.GetSeconds() >= math.MaxInt64/int64(time.Second) {
		return "unlimited"
	}
	return d.AsDuration().String()
}

func (c *console) createQueue(rq *request) error {
	name := strings.TrimSpace(rq.r.PostForm.Get("name"))
	props := &raftbusv1.QueueProperties{}
	if p := rq.r.PostForm.Get("partitions"); p != "" {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return badRequest("partitions: %v", err)
		}
		props.PartitionCount = proto.Uint32(uint32(n))
	}
	props.RequiresSession = proto.Bool(rq.r.PostForm.Get("sessions") == "on")
	props.RequiresDuplicateDetection = proto.Bool(rq.r.PostForm.Get("duplicates") == "on")
	if _, err := rq.admin.CreateQueue(rq.ctx, name, props); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"entities", http.StatusSeeOther)
	return nil
}

func (c *console) createTopic(rq *request) error {
	props := &raftbusv1.TopicProperties{}
	if p := rq.r.PostForm.Get("partitions"); p != "" {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return badRequest("partitions: %v", err)
		}
		props.PartitionCount = proto.Uint32(uint32(n))
	}
	if _, err := rq.admin.CreateTopic(rq.ctx, strings.TrimSpace(rq.r.PostForm.Get("name")), props); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"entities", http.StatusSeeOther)
	return nil
}

func (c *console) deleteTopic(rq *request) error {
	if err := rq.admin.DeleteTopic(rq.ctx, rq.r.PathValue("name")); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"entities", http.StatusSeeOther)
	return nil
}

func (c *console) createSubscription(rq *request) error {
	f := rq.r.PostForm
	if _, err := rq.admin.CreateSubscription(rq.ctx, f.Get("topic"), strings.TrimSpace(f.Get("name")), &raftbusv1.SubscriptionProperties{
		RequiresSession: proto.Bool(f.Get("sessions") == "on"),
	}, nil); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"entities", http.StatusSeeOther)
	return nil
}

func (c *console) deleteSubscription(rq *request) error {
	topic, sub, ok := strings.Cut(rq.r.PostForm.Get("path"), "/subscriptions/")
	if !ok {
		return badRequest("not a subscription path: %q", rq.r.PostForm.Get("path"))
	}
	if err := rq.admin.DeleteSubscription(rq.ctx, topic, sub); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"entities", http.StatusSeeOther)
	return nil
}

// updateQueue changes the settings a queue's form carries; the others
// stay as they are.
func (c *console) updateQueue(rq *request) error {
	f := rq.r.PostForm
	props := &raftbusv1.QueueProperties{}
	if v := f.Get("lock_duration"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return badRequest("lock duration: %v", err)
		}
		props.LockDuration = durationpb.New(d)
	}
	if v := f.Get("max_delivery_count"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return badRequest("max delivery count: %v", err)
		}
		props.MaxDeliveryCount = proto.Int32(int32(n))
	}
	if v := f.Get("time_to_live"); v != "" && v != "unlimited" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return badRequest("time to live: %v", err)
		}
		props.DefaultMessageTimeToLive = durationpb.New(d)
	}
	name := rq.r.PathValue("name")
	if _, err := rq.admin.UpdateQueue(rq.ctx, name, props); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"messages?"+queryOf("entity", name, "done", "updated queue "+name), http.StatusSeeOther)
	return nil
}

func (c *console) deleteQueue(rq *request) error {
	if err := rq.admin.DeleteQueue(rq.ctx, rq.r.PathValue("name")); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"entities", http.StatusSeeOther)
	return nil
}

// shownMessage is one message as the messages page shows it.
type shownMessage struct {
	*client.ReceivedMessage
	State      string
	BodyFormat string
	Body       string
	Properties []string
}

func show(m *client.ReceivedMessage) shownMessage {
	s := shownMessage{ReceivedMessage: m, State: strings.ToLower(strings.TrimPrefix(raftbusv1.MessageState(m.State).String(), "MESSAGE_STATE_"))}
	var v any
	switch {
	case json.Unmarshal(m.Body, &v) == nil && len(bytes.TrimSpace(m.Body)) > 0:
		b, _ := json.MarshalIndent(v, "", "  ")
		s.BodyFormat, s.Body = "json", string(b)
	case utf8.Valid(m.Body):
		s.BodyFormat, s.Body = "text", string(m.Body)
	default:
		s.BodyFormat, s.Body = "hex", hex.Dump(m.Body)
	}
	for k, v := range m.ApplicationProperties {
		s.Properties = append(s.Properties, propertyText(k, v))
	}
	slices.Sort(s.Properties)
	return s
}

// propertyText shows a property, naming its type when it is one of the
// exact number types (k:int32 = 5), which print like any other number.
func propertyText(name string, v any) string {
	switch v.(type) {
	case int8, int16, int32, uint8, uint16, uint32, uint64, float32:
		return fmt.Sprintf("%s:%T = %v", name, v, v)
	}
	return fmt.Sprintf("%s = %v", name, v)
}

// target is the entity a messages page or action is about: a queue or
// topic/subscriptions/name path, and whether its dead-letter sub-queue.
type target struct {
	Path string
	DLQ  bool
}

func targetOf(path, dlq string) (target, error) {
	if path == "" {
		return target{}, badRequest("no entity named")
	}
	return target{Path: path, DLQ: dlq == "1" || dlq == "on" || dlq == "true"}, nil
}

func (t target) receiver(c *client.Client, mode client.ReceiveMode) (*client.Receiver, error) {
	opts := &client.ReceiverOptions{ReceiveMode: mode}
	if t.DLQ {
		opts.SubQueue = client.SubQueueDeadLetter
	}
	if topic, sub, ok := strings.Cut(t.Path, "/subscriptions/"); ok {
		return c.NewReceiverForSubscription(topic, sub, opts)
	}
	return c.NewReceiverForQueue(t.Path, opts)
}

func (c *console) messagesPage(rq *request) error {
	q := rq.r.URL.Query()
	t, err := targetOf(q.Get("entity"), q.Get("dlq"))
	if err != nil {
		return err
	}
	from := int64(0)
	if f := q.Get("from"); f != "" {
		if from, err = strconv.ParseInt(f, 10, 64); err != nil {
			return badRequest("from: %v", err)
		}
	}
	r, err := t.receiver(rq.client, client.ReceiveModePeekLock)
	if err != nil {
		return err
	}
	msgs, err := r.PeekMessages(rq.ctx, pageSize, &client.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil {
		return err
	}
	var shown []shownMessage
	for _, m := range msgs {
		shown = append(shown, show(m))
	}
	data := map[string]any{"Page": "messages", "Target": t, "Messages": shown, "From": from, "Done": q.Get("done")}
	if !t.DLQ && !strings.Contains(t.Path, "/subscriptions/") {
		if props, err := rq.admin.GetQueue(rq.ctx, t.Path); err == nil {
			data["Queue"] = props
			data["QueueTTL"] = lifetime(props.GetDefaultMessageTimeToLive())
		}
	}
	if len(msgs) == pageSize {
		dlq := ""
		if t.DLQ {
			dlq = "1"
		}
		data["Next"] = true
		data["NextQuery"] = template.URL(queryOf("entity", t.Path, "dlq", dlq, "from", strconv.FormatInt(msgs[len(msgs)-1].SequenceNumber+1, 10)))
	}
	c.render(rq.w, "messages", rq.session, data)
	return nil
}

func (c *console) sendMessage(rq *request) error {
	f := rq.r.PostForm
	path := f.Get("entity")
	topic, _, isSub := strings.Cut(path, "/subscriptions/")
	if isSub {
		path = topic
	}
	s, err := rq.client.NewSender(path, nil)
	if err != nil {
		return err
	}
	m := &client.Message{Body: []byte(f.Get("body")), MessageID: f.Get("message_id"), SessionID: f.Get("session_id"),
		ContentType: f.Get("content_type"), Subject: f.Get("subject")}
	if err := s.SendMessage(rq.ctx, m, nil); err != nil {
		return err
	}
	http.Redirect(rq.w, rq.r, Prefix+"messages?"+queryOf("entity", f.Get("entity"), "done", "sent 1 message to "+path), http.StatusSeeOther)
	return nil
}
