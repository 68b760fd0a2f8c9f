package engine

import (
	"math"
	"unicode/utf8"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// validate checks a command's shape before anything is applied, so that a
// malformed command changes nothing, not even the clock. Checks that need
// the entity (sizes, quotas, sessions) happen when the command is applied.
func validate(cmd *enginev1.Command) *Error {
	if cmd == nil || cmd.GetBody() == nil {
		return invalidf("command has no body")
	}
	if seed := cmd.GetTokenSeed(); len(seed) != 0 && len(seed) != tokenSeedSize {
		return invalidf("token_seed must be %d bytes, not %d", tokenSeedSize, len(seed))
	}
	switch b := cmd.GetBody().(type) {
	case *enginev1.Command_ConfigureEntity:
		p := b.ConfigureEntity.GetProperties()
		for _, f := range [...]struct{ name, value string }{
			{"name", p.GetName()}, {"topic.name", b.ConfigureEntity.GetTopic().GetName()}, {"forward_to", p.GetForwardTo()}, {"forward_dead_lettered_messages_to", p.GetForwardDeadLetteredMessagesTo()},
		} {
			if err := checkText(f.name, f.value); err != nil {
				return err
			}
		}
		return checkPath(b.ConfigureEntity.GetEntityPath())
	case *enginev1.Command_Send:
		return checkMessages(b.Send.GetEntityPath(), b.Send.GetMessages(), false)
	case *enginev1.Command_AcceptTransfer:
		return checkAcceptTransfer(b.AcceptTransfer)
	case *enginev1.Command_CompleteTransfer:
		for _, f := range b.CompleteTransfer.GetFailed() {
			if err := checkText("failed transfer description", f.GetDescription()); err != nil {
				return err
			}
		}
		for _, g := range b.CompleteTransfer.GetGone() {
			if err := checkText("gone target description", g.GetDescription()); err != nil {
				return err
			}
		}
		return nil
	case *enginev1.Command_ForgetTransferStreams:
		for _, st := range b.ForgetTransferStreams.GetStreams() {
			if st == "" || len(st) > maxStreamLength || !utf8.ValidString(st) {
				return invalidf("stream must be 1 to %d bytes of UTF-8", maxStreamLength)
			}
		}
		if b.ForgetTransferStreams.GetUnusedForMs() < 0 {
			return invalidf("unused_for_ms must not be negative")
		}
		return checkPath(b.ForgetTransferStreams.GetEntityPath())
	case *enginev1.Command_Schedule:
		return checkMessages(b.Schedule.GetEntityPath(), b.Schedule.GetMessages(), true)
	case *enginev1.Command_CancelScheduled:
		return checkPath(b.CancelScheduled.GetEntityPath())
	case *enginev1.Command_Lock:
		c := b.Lock
		if err := checkReceive(cmd, c.GetEntityPath(), c.GetSubQueue(), c.GetReceiveMode()); err != nil {
			return err
		}
		if err := checkReceiveID(c.GetReceiveId()); err != nil {
			return err
		}
		if c.GetReplay() && len(c.GetReceiveId()) == 0 {
			return invalidf("replay needs a receive_id")
		}
		return checkOptionalSession(c.GetSessionId(), c.GetSessionLockToken())
	case *enginev1.Command_ReceiveDeferred:
		c := b.ReceiveDeferred
		if err := checkReceive(cmd, c.GetEntityPath(), c.GetSubQueue(), c.GetReceiveMode()); err != nil {
			return err
		}
		if err := checkReceiveID(c.GetReceiveId()); err != nil {
			return err
		}
		return checkOptionalSession(c.GetSessionId(), c.GetSessionLockToken())
	case *enginev1.Command_Settle:
		c := b.Settle
		if err := checkLock(c.GetEntityPath(), c.GetSubQueue(), c.GetLockToken()); err != nil {
			return err
		}
		switch c.GetDisposition() {
		case enginev1.Disposition_DISPOSITION_COMPLETE:
			if len(c.GetPropertiesToModify()) > 0 {
				return invalidf("properties_to_modify cannot be set when completing a message")
			}
		case enginev1.Disposition_DISPOSITION_ABANDON, enginev1.Disposition_DISPOSITION_DEAD_LETTER, enginev1.Disposition_DISPOSITION_DEFER:
		default:
			return invalidf("unknown disposition %d", int32(c.GetDisposition()))
		}
		if err := checkText("dead_letter_reason", c.GetDeadLetterReason()); err != nil {
			return err
		}
		if err := checkText("dead_letter_error_description", c.GetDeadLetterErrorDescription()); err != nil {
			return err
		}
		if err := checkOptionalSession(c.GetSessionId(), c.GetSessionLockToken()); err != nil {
			return err
		}
		if err := checkSettlementID(c.GetSettlementId()); err != nil {
			return err
		}
		return checkProperties(c.GetPropertiesToModify())
	case *enginev1.Command_RenewLock:
		c := b.RenewLock
		if err := checkLock(c.GetEntityPath(), c.GetSubQueue(), c.GetLockToken()); err != nil {
			return err
		}
		return checkOptionalSession(c.GetSessionId(), c.GetSessionLockToken())
	case *enginev1.Command_AcceptSession:
		c := b.AcceptSession
		if len(cmd.GetTokenSeed()) != tokenSeedSize {
			return invalidf("AcceptSession needs a %d-byte token_seed", tokenSeedSize)
		}
		if err := checkPath(c.GetEntityPath()); err != nil {
			return err
		}
		if c.GetSessionId() != "" {
			return checkSessionID(c.GetSessionId())
		}
	case *enginev1.Command_RenewSessionLock:
		c := b.RenewSessionLock
		return checkSessionLock(c.GetEntityPath(), c.GetSessionId(), c.GetLockToken())
	case *enginev1.Command_SetSessionState:
		c := b.SetSessionState
		return checkSessionLock(c.GetEntityPath(), c.GetSessionId(), c.GetLockToken())
	case *enginev1.Command_ReleaseSession:
		c := b.ReleaseSession
		return checkSessionLock(c.GetEntityPath(), c.GetSessionId(), c.GetLockToken())
	case *enginev1.Command_Tick:
	case *enginev1.Command_AddRule:
		if b.AddRule.GetRule() == nil {
			return invalidf("rule is missing")
		}
		return checkPath(b.AddRule.GetEntityPath())
	case *enginev1.Command_RemoveRule:
		if err := checkText("rule_name", b.RemoveRule.GetRuleName()); err != nil {
			return err
		}
		return checkPath(b.RemoveRule.GetEntityPath())
	default:
		return invalidf("unknown command %T", b)
	}
	return nil
}

func checkReceiveID(id []byte) *Error {
	if len(id) > maxReceiveIDSize {
		return invalidf("receive_id must be at most %d bytes, not %d", maxReceiveIDSize, len(id))
	}
	return nil
}

func checkSettlementID(id []byte) *Error {
	if len(id) > maxSettlementIDSize {
		return invalidf("settlement_id must be at most %d bytes, not %d", maxSettlementIDSize, len(id))
	}
	return nil
}

func checkPath(path string) *Error {
	if path == "" {
		return invalidf("entity_path is empty")
	}
	return checkText("entity_path", path)
}

func checkSubQueue(sq raftbusv1.SubQueue) *Error {
	switch sq {
	case raftbusv1.SubQueue_SUB_QUEUE_UNSPECIFIED, raftbusv1.SubQueue_SUB_QUEUE_DEAD_LETTER:
		return nil
	}
	return invalidf("unknown sub-queue %d", int32(sq))
}

func checkReceive(cmd *enginev1.Command, path string, sq raftbusv1.SubQueue, mode raftbusv1.ReceiveMode) *Error {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := checkSubQueue(sq); err != nil {
		return err
	}
	switch mode {
	case raftbusv1.ReceiveMode_RECEIVE_MODE_UNSPECIFIED, raftbusv1.ReceiveMode_RECEIVE_MODE_PEEK_LOCK:
		if len(cmd.GetTokenSeed()) != tokenSeedSize {
			return invalidf("a PeekLock receive needs a %d-byte token_seed", tokenSeedSize)
		}
	case raftbusv1.ReceiveMode_RECEIVE_MODE_RECEIVE_AND_DELETE:
	default:
		return invalidf("unknown receive mode %d", int32(mode))
	}
	return nil
}

func checkLock(path string, sq raftbusv1.SubQueue, token []byte) *Error {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := checkSubQueue(sq); err != nil {
		return err
	}
	if len(token) != len(lockToken{}) {
		return invalidf("lock_token must be %d bytes, not %d", len(lockToken{}), len(token))
	}
	return nil
}

func checkSessionID(id string) *Error {
	if id == "" {
		return invalidf("session_id is empty")
	}
	if len(id) > maxSessionIDLength {
		return invalidf("session_id is longer than %d characters", maxSessionIDLength)
	}
	return checkText("session_id", id)
}

// checkSessionLock checks a command that names a held session.
func checkSessionLock(path, id string, token []byte) *Error {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := checkSessionID(id); err != nil {
		return err
	}
	if len(token) != len(lockToken{}) {
		return invalidf("session lock_token must be %d bytes, not %d", len(lockToken{}), len(token))
	}
	return nil
}

// checkOptionalSession checks the session a receive or settlement may name:
// none, or a session id with its lock token.
func checkOptionalSession(id string, token []byte) *Error {
	if id == "" && len(token) == 0 {
		return nil
	}
	if err := checkSessionID(id); err != nil {
		return err
	}
	if len(token) != len(lockToken{}) {
		return invalidf("session_lock_token must be %d bytes, not %d", len(lockToken{}), len(token))
	}
	return nil
}

func checkMessages(path string, msgs []*raftbusv1.Message, schedule bool) *Error {
	if err := checkPath(path); err != nil {
		return err
	}
	for i, m := range msgs {
		if m == nil {
			return invalidf("message %d is missing", i)
		}
		for _, f := range [...]struct{ name, value string }{
			{"message_id", m.GetMessageId()}, {"content_type", m.GetContentType()},
			{"correlation_id", m.GetCorrelationId()}, {"subject", m.GetSubject()}, {"to", m.GetTo()},
			{"reply_to", m.GetReplyTo()}, {"reply_to_session_id", m.GetReplyToSessionId()},
			{"session_id", m.GetSessionId()}, {"partition_key", m.GetPartitionKey()},
		} {
			if err := checkText(f.name, f.value); err != nil {
				return invalidf("message %d: %s", i, err.Message)
			}
		}
		if len(m.GetSessionId()) > maxSessionIDLength {
			return invalidf("message %d: session_id is longer than %d characters", i, maxSessionIDLength)
		}
		if len(m.GetMessageId()) > maxMessageIDLength {
			return invalidf("message %d: message_id is longer than %d characters", i, maxMessageIDLength)
		}
		if s, k := m.GetSessionId(), m.GetPartitionKey(); s != "" && k != "" && s != k {
			return invalidf("message %d: session_id %q and partition_key %q differ", i, s, k)
		}
		if d := m.GetTimeToLive(); d != nil {
			if err := d.CheckValid(); err != nil {
				return invalidf("message %d: time_to_live: %v", i, err)
			}
			if d.AsDuration() <= 0 {
				return invalidf("message %d: time_to_live must be positive", i)
			}
		}
		if t := m.GetScheduledEnqueueTime(); t != nil {
			if err := t.CheckValid(); err != nil {
				return invalidf("message %d: scheduled_enqueue_time: %v", i, err)
			}
		} else if schedule {
			return invalidf("message %d: scheduled_enqueue_time is required to schedule a message", i)
		}
		if err := checkProperties(m.GetApplicationProperties()); err != nil {
			return invalidf("message %d: %s", i, err.Message)
		}
	}
	return nil
}

// checkProperties names the first invalid property in key order, so that
// the error does not depend on map iteration order.
func checkProperties(props map[string]*raftbusv1.PropertyValue) *Error {
	bad, found := "", false
	for k, v := range props {
		ok := utf8.ValidString(k)
		switch x := v.GetValue().(type) {
		case *raftbusv1.PropertyValue_TimestampValue:
			ok = ok && x.TimestampValue.CheckValid() == nil
		case *raftbusv1.PropertyValue_StringValue:
			ok = ok && utf8.ValidString(x.StringValue)
		case *raftbusv1.PropertyValue_Int16Value:
			ok = ok && x.Int16Value >= math.MinInt16 && x.Int16Value <= math.MaxInt16
		case *raftbusv1.PropertyValue_Int8Value:
			ok = ok && x.Int8Value >= math.MinInt8 && x.Int8Value <= math.MaxInt8
		case *raftbusv1.PropertyValue_Uint16Value:
			ok = ok && x.Uint16Value <= math.MaxUint16
		case *raftbusv1.PropertyValue_Uint8Value:
			ok = ok && x.Uint8Value <= math.MaxUint8
		}
		if !ok && (!found || k < bad) {
			bad, found = k, true
		}
	}
	if found {
		return invalidf("application property %q is not valid (bad UTF-8, timestamp, or a short, sbyte, ushort or byte out of range)", bad)
	}
	return nil
}

func checkText(name, s string) *Error {
	if !utf8.ValidString(s) {
		return invalidf("%s is not valid UTF-8", name)
	}
	return nil
}
