// Package sqlfilter owns the subscription rule language of raftbus: the
// Service Bus SQL filter subset (SqlFilter), SQL rule actions (SET and
// REMOVE statements) and correlation filters.
//
// Expressions are parsed and checked once, when a rule is created; the
// compiled Filter, Action and CorrelationFilter are immutable and may be
// shared by any number of callers. Evaluation reads a message through the
// small Message interface, so the engine can keep its messages in whatever
// compact form it likes.
//
// The package is pure and deterministic: it does no I/O, reads no clock,
// draws no random numbers and starts no goroutines, because it runs inside
// the Raft state machine where every replica must reach the same answer.
// Functions whose results are not deterministic (newid()) are rejected when
// an expression is parsed. No input, however malformed, makes it panic, and
// a length limit (MaxExpressionLength) and a nesting limit (MaxNestingDepth)
// bound the work any one expression can cause.
//
// # Language
//
// Keywords (AND, OR, NOT, IN, LIKE, ESCAPE, IS, NULL, EXISTS, TRUE, FALSE,
// SET, REMOVE) and the sys/user scopes are case-insensitive. System property
// names (sys.Label, sys.MessageId, ...) are case-insensitive; application
// property names are case-sensitive, as application property keys are
// distinct strings on the wire (AMQP application-properties) and the Service
// Bus client libraries keep them in an ordinal dictionary. A name that is not
// a regular identifier, or that is a keyword, is written [in brackets] (with
// ]] for a literal ]) or "in double quotes".
//
// Parameters (@name) are bound when an expression is parsed, from a map
// keyed "@name" (as the Service Bus SDKs write it) or "name". Functions are
// not supported: newid() is not deterministic and property() is not needed.
// A unary '+' is accepted and ignored. A system property the message does
// not carry (Message.System returns false) is NULL, as is a missing
// application property; naming a system property that does not exist is a
// parse error.
//
// Values are null, string, int64, float64, bool, bytes and timestamp. The
// narrower and unsigned integer kinds of raftbusv1.PropertyValue (int32,
// int16, int8, uint32, uint16, uint8, and uint64 up to the largest int64)
// are int64 values, float32 and larger uint64s float64 values, so that
// filters compare them by value; their Origin lets Value.PropertyValue give
// a copied property back its kind. Integer literals are int64, literals
// with a decimal point or an exponent are float64. sys.TimeToLive is a
// float64 number of seconds (see DurationValue), so sys.TimeToLive > 60
// reads naturally; sys.EnqueuedTimeUtc and sys.ScheduledEnqueueTimeUtc are
// timestamps, comparable with timestamp parameters.
//
// Comparisons follow SQL three-valued logic: a comparison with NULL or with
// a property the message does not have is unknown, and a filter whose
// result is unknown does not match. int64 and float64 compare and combine
// after promotion to float64. Comparing or combining values of incompatible
// kinds (a string with a number, ordering booleans), integer overflow and
// integer division by zero are evaluation errors (*EvalError); Service Bus
// dead-letters such a message when the subscription has
// DeadLetteringOnFilterEvaluationExceptions, which is the engine's call.
// String comparison and LIKE are ordinal (byte-wise, case-sensitive).
package sqlfilter
