package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/raftbus/raftbus/client"
)

// Dead-letter actions. Both receive the dead-letter sub-queue in peek-lock
// mode and settle each message they are asked for (the others are
// abandoned, left where they were): resubmit sends a copy to the entity
// first (to the topic, for a subscription's), then completes the
// dead-lettered message; purge completes it. The form carries a token:
// the same form sent twice (a double click, a reload) acts once, and a
// message completed is gone from the sub-queue, so a later action cannot
// send it again.

// actionBatch and actionRounds bound one action: at most this many
// receives of this many messages.
const (
	actionBatch  = 100
	actionRounds = 50
)

func (c *console) resubmit(rq *request) error { return c.deadLetterAction(rq, true) }

func (c *console) purge(rq *request) error { return c.deadLetterAction(rq, false) }

func (c *console) deadLetterAction(rq *request, resubmit bool) error {
	f := rq.r.PostForm
	t, err := targetOf(f.Get("entity"), "1")
	if err != nil {
		return err
	}
	token := f.Get("action")
	if token == "" {
		return badRequest("the form has no action token: load the page again")
	}
	c.mu.Lock()
	summary, repeated := c.done[token]
	c.mu.Unlock()
	if !repeated {
		summary, err = c.settleDeadLetters(rq, t, f["seq"], f.Get("all") == "1", resubmit)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.done[token] = summary
		c.mu.Unlock()
	}
	http.Redirect(rq.w, rq.r, Prefix+"messages?"+queryOf("entity", t.Path, "dlq", "1", "done", summary), http.StatusSeeOther)
	return nil
}

func (c *console) settleDeadLetters(rq *request, t target, seqs []string, all, resubmit bool) (string, error) {
	want := make(map[int64]bool)
	for _, s := range seqs {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", badRequest("sequence number %q: %v", s, err)
		}
		want[n] = true
	}
	if !all && len(want) == 0 {
		return "", badRequest("no message selected")
	}
	r, err := t.receiver(rq.client, client.ReceiveModePeekLock)
	if err != nil {
		return "", err
	}
	var sender *client.Sender
	dest := t.Path
	if resubmit {
		if topic, _, ok := strings.Cut(t.Path, "/subscriptions/"); ok {
			dest = topic
		}
		if sender, err = rq.client.NewSender(dest, nil); err != nil {
			return "", err
		}
	}
	done, seen := 0, make(map[int64]bool)
	for round := 0; round < actionRounds && (all || done < len(want)); round++ {
		msgs, err := r.ReceiveMessages(rq.ctx, actionBatch, &client.ReceiveMessagesOptions{MaxWaitTime: 200 * time.Millisecond})
		if err != nil {
			return "", err
		}
		if len(msgs) == 0 {
			break
		}
		fresh := false
		for _, m := range msgs {
			fresh = fresh || !seen[m.SequenceNumber]
			seen[m.SequenceNumber] = true
			if !all && !want[m.SequenceNumber] {
				if err := r.AbandonMessage(rq.ctx, m, nil); err != nil {
					return "", err
				}
				continue
			}
			if resubmit {
				if err := sender.SendMessage(rq.ctx, copyOf(m), nil); err != nil {
					return "", fmt.Errorf("resubmit message %d: %w", m.SequenceNumber, err)
				}
			}
			if err := r.CompleteMessage(rq.ctx, m, nil); err != nil {
				return "", fmt.Errorf("complete dead-lettered message %d: %w", m.SequenceNumber, err)
			}
			done++
		}
		if !fresh {
			break // only messages abandoned before came back
		}
	}
	verb := "purged"
	if resubmit {
		verb = "resubmitted to " + dest
	}
	return fmt.Sprintf("%s %d message(s)", verb, done), nil
}

// copyOf is what a resubmitted message carries: what its sender set.
func copyOf(m *client.ReceivedMessage) *client.Message {
	return &client.Message{
		MessageID: m.MessageID, Body: m.Body, ContentType: m.ContentType, CorrelationID: m.CorrelationID,
		Subject: m.Subject, To: m.To, ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID,
		SessionID: m.SessionID, PartitionKey: m.PartitionKey, ApplicationProperties: m.ApplicationProperties,
	}
}
