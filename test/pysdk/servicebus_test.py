"""The Python Azure Service Bus SDK (Debian's python3-azure: azure-servicebus
on uamqp), unmodified, against a raftbusd node over AMQP with TLS and access
policies. pysdk_test.go starts the node, creates the entities named here and
runs this file with Debian's python3; run alone, it reads the same settings
from the environment:

  RAFTBUS_PY_CONNECTION_STRING  the root policy's connection string, with
                                the node's AMQP host (port 5671) as endpoint
  RAFTBUS_PY_CA                 the CA certificate the node's is issued by
"""

import datetime
import os
import unittest
import uuid

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
    NEXT_AVAILABLE_SESSION,
)
from azure.servicebus.exceptions import (
    MessageLockLostError,
    ServiceBusCommunicationError,
    ServiceBusError,
    SessionLockLostError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
)

CONNECTION_STRING = os.environ["RAFTBUS_PY_CONNECTION_STRING"]
CA = os.environ["RAFTBUS_PY_CA"]

# How long a receive waits for a message that must be there.
WAIT = 10


def client(connection_string=CONNECTION_STRING):
    # retry_total=0: a failure shows at once instead of after the SDK's
    # retries, and the error tests see the first error.
    return ServiceBusClient.from_connection_string(
        connection_string, connection_verify=CA, retry_total=0
    )


def bodies(msgs):
    return sorted(str(m) for m in msgs)


def receive(receiver, count):
    """Receive exactly count messages (the SDK may hand them out in parts)."""
    got = []
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=WAIT)
    while len(got) < count and datetime.datetime.now() < deadline:
        got += receiver.receive_messages(max_message_count=count - len(got), max_wait_time=WAIT)
    if len(got) != count:
        raise AssertionError("received %d messages, want %d" % (len(got), count))
    return got


class Queues(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sb = client()

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()

    def assertEmpty(self, queue, sub_queue=None):
        with self.sb.get_queue_receiver(queue, sub_queue=sub_queue) as r:
            self.assertEqual(r.peek_messages(max_message_count=10), [])

    def test_send_receive_complete(self):
        with self.sb.get_queue_sender("py-basic") as s:
            s.send_messages(ServiceBusMessage("one", application_properties={"k": "v"}, subject="greeting"))
        with self.sb.get_queue_receiver("py-basic") as r:
            (m,) = receive(r, 1)
            self.assertEqual(str(m), "one")
            self.assertEqual(m.application_properties[b"k"], b"v")
            self.assertEqual(m.subject, "greeting")
            self.assertEqual(m.delivery_count, 0)
            self.assertGreater(m.sequence_number, 0)
            self.assertIsNotNone(m.enqueued_time_utc)
            r.complete_message(m)
        self.assertEmpty("py-basic")

    def test_completes_right_before_close_all_apply(self):
        # Six messages completed one by one, then the receiver closes at
        # once: every complete the SDK returned from must have happened.
        with self.sb.get_queue_sender("py-settle") as s:
            s.send_messages([ServiceBusMessage("m%d" % i) for i in range(6)])
        with self.sb.get_queue_receiver("py-settle") as r:
            for m in receive(r, 6):
                r.complete_message(m)
        self.assertEmpty("py-settle")

    def test_batch(self):
        with self.sb.get_queue_sender("py-batch") as s:
            batch = s.create_message_batch()
            for i in range(20):
                batch.add_message(ServiceBusMessage("b%02d" % i))
            s.send_messages(batch)
        with self.sb.get_queue_receiver("py-batch", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            got = receive(r, 20)
        self.assertEqual(bodies(got), ["b%02d" % i for i in range(20)])

    def test_abandon_redelivers(self):
        with self.sb.get_queue_sender("py-abandon") as s:
            s.send_messages(ServiceBusMessage("again"))
        with self.sb.get_queue_receiver("py-abandon") as r:
            (m,) = receive(r, 1)
            r.abandon_message(m)
            (m,) = receive(r, 1)
            self.assertEqual(str(m), "again")
            self.assertEqual(m.delivery_count, 1)
            r.complete_message(m)

    def test_dead_letter_and_the_dlq(self):
        with self.sb.get_queue_sender("py-dlq") as s:
            s.send_messages(ServiceBusMessage("poison"))
        with self.sb.get_queue_receiver("py-dlq") as r:
            (m,) = receive(r, 1)
            r.dead_letter_message(m, reason="bad", error_description="cannot parse")
        with self.sb.get_queue_receiver("py-dlq", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as r:
            (m,) = receive(r, 1)
            self.assertEqual(str(m), "poison")
            self.assertEqual(m.dead_letter_reason, "bad")
            self.assertEqual(m.dead_letter_error_description, "cannot parse")
            r.complete_message(m)
        self.assertEmpty("py-dlq")
        self.assertEmpty("py-dlq", ServiceBusSubQueue.DEAD_LETTER)

    def test_defer_and_receive_deferred(self):
        with self.sb.get_queue_sender("py-defer") as s:
            s.send_messages(ServiceBusMessage("later"))
        with self.sb.get_queue_receiver("py-defer") as r:
            (m,) = receive(r, 1)
            seq = m.sequence_number
            r.defer_message(m)
            self.assertEqual(r.receive_messages(max_wait_time=1), [])
            (d,) = r.receive_deferred_messages([seq])
            self.assertEqual(str(d), "later")
            r.complete_message(d)
        self.assertEmpty("py-defer")

    def test_peek(self):
        with self.sb.get_queue_sender("py-peek") as s:
            s.send_messages([ServiceBusMessage("p%d" % i) for i in range(3)])
        with self.sb.get_queue_receiver("py-peek") as r:
            peeked = r.peek_messages(max_message_count=10)
            self.assertEqual([str(m) for m in peeked], ["p0", "p1", "p2"])
            again = r.peek_messages(max_message_count=10, sequence_number=peeked[1].sequence_number)
            self.assertEqual([str(m) for m in again], ["p1", "p2"])
            # Peeking locks nothing: all three are still there to receive.
            got = receive(r, 3)
            self.assertEqual(bodies(got), ["p0", "p1", "p2"])
            for m in got:
                r.complete_message(m)

    def test_schedule_and_cancel(self):
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
        with self.sb.get_queue_sender("py-schedule") as s:
            (cancelled,) = s.schedule_messages(ServiceBusMessage("never"), later)
            (kept,) = s.schedule_messages(ServiceBusMessage("soon"), soon)
            self.assertNotEqual(cancelled, kept)
            with self.sb.get_queue_receiver("py-schedule") as r:
                peeked = r.peek_messages(max_message_count=10)
            # Peek shows scheduled messages, by the number schedule gave.
            self.assertEqual([m.sequence_number for m in peeked if str(m) == "never"], [cancelled])
            s.cancel_scheduled_messages(cancelled)
        with self.sb.get_queue_receiver("py-schedule") as r:
            # The one left becomes active at its time (with a sequence
            # number of its own, as in Service Bus).
            (m,) = receive(r, 1)
            self.assertEqual(str(m), "soon")
            self.assertGreaterEqual(m.enqueued_time_utc, soon.replace(microsecond=0))
            r.complete_message(m)
            self.assertEqual(r.peek_messages(max_message_count=10), [])

    def test_receive_and_delete(self):
        with self.sb.get_queue_sender("py-rad") as s:
            s.send_messages(ServiceBusMessage("gone"))
        with self.sb.get_queue_receiver("py-rad", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            (m,) = receive(r, 1)
            self.assertEqual(str(m), "gone")
        self.assertEmpty("py-rad")

    def test_lock_renewal_and_expiry(self):
        # py-lock has a lock duration of 2 s.
        with self.sb.get_queue_sender("py-lock") as s:
            s.send_messages(ServiceBusMessage("held"))
        with self.sb.get_queue_receiver("py-lock") as r:
            (m,) = receive(r, 1)
            before = m.locked_until_utc
            renewed = r.renew_message_lock(m)
            self.assertGreaterEqual(renewed, before)
            r.complete_message(m)
        with self.sb.get_queue_sender("py-lock") as s:
            s.send_messages(ServiceBusMessage("dropped"))
        with self.sb.get_queue_receiver("py-lock") as r:
            (m,) = receive(r, 1)
            # The lock ends: the message goes to another receiver, the
            # delivery counted.
            with self.sb.get_queue_receiver("py-lock") as other:
                (again,) = receive(other, 1)
                self.assertEqual(str(again), "dropped")
                self.assertEqual(again.delivery_count, 1)
                other.complete_message(again)
            # The SDK itself refuses to settle on an expired lock.
            with self.assertRaises(ServiceBusError):
                r.complete_message(m)


class Sessions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sb = client()

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()

    def test_next_session_state_and_renew(self):
        with self.sb.get_queue_sender("py-sessions") as s:
            s.send_messages([ServiceBusMessage("a%d" % i, session_id="a") for i in range(3)])
        with self.sb.get_queue_receiver("py-sessions", session_id=NEXT_AVAILABLE_SESSION) as r:
            self.assertEqual(r.session.session_id, "a")
            got = receive(r, 3)
            self.assertEqual([str(m) for m in got], ["a0", "a1", "a2"])
            for m in got:
                self.assertEqual(m.session_id, "a")
                r.complete_message(m)
            self.assertIsNone(r.session.get_state())
            r.session.set_state("step 3")
            self.assertEqual(r.session.get_state(), b"step 3")
            before = r.session.locked_until_utc
            self.assertGreaterEqual(r.session.renew_lock(), before)
        with self.sb.get_queue_receiver("py-sessions", session_id="a") as r:
            self.assertEqual(r.session.get_state(), b"step 3")
            r.session.set_state(None)


    def test_session_lock_lost(self):
        # py-session-lock has a lock duration of 2 s. A receiver that
        # lets its session's lock end loses it to the next receiver, and
        # its settlements fail with the session lock lost.
        with self.sb.get_queue_sender("py-session-lock") as s:
            s.send_messages(ServiceBusMessage("b0", session_id="b"))
        with self.sb.get_queue_receiver("py-session-lock", session_id="b") as first:
            (m,) = receive(first, 1)
            with self.sb.get_queue_receiver("py-session-lock", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT) as second:
                self.assertEqual(second.session.session_id, "b")
                (again,) = receive(second, 1)
                self.assertEqual(str(again), "b0")
                second.complete_message(again)
            with self.assertRaises(SessionLockLostError):
                first.complete_message(m)


class Topics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sb = client()

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()

    def drain(self, sub):
        got = []
        with self.sb.get_subscription_receiver("py-orders", sub, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            while True:
                msgs = r.receive_messages(max_message_count=10, max_wait_time=2)
                if not msgs:
                    return sorted(str(m) for m in got)
                got += msgs

    def test_rule_filters(self):
        # py-orders: "all" keeps the default rule, "eu" has the SQL filter
        # region = 'eu', "red" the correlation filter correlation-id red.
        with self.sb.get_topic_sender("py-orders") as s:
            s.send_messages([
                ServiceBusMessage("eu-blue", application_properties={"region": "eu"}, correlation_id="blue"),
                ServiceBusMessage("us-red", application_properties={"region": "us"}, correlation_id="red"),
                ServiceBusMessage("us-blue", application_properties={"region": "us"}, correlation_id="blue"),
            ])
        self.assertEqual(self.drain("all"), ["eu-blue", "us-blue", "us-red"])
        self.assertEqual(self.drain("eu"), ["eu-blue"])
        self.assertEqual(self.drain("red"), ["us-red"])


class Errors(unittest.TestCase):
    def test_unknown_entity(self):
        # A link to an entity that does not exist is detached with
        # amqp:not-found, not retried; the SDK (on uamqp) raises that as
        # ServiceBusCommunicationError, as it does against Service Bus.
        with client() as sb:
            with self.assertRaises(ServiceBusCommunicationError) as caught:
                with sb.get_queue_sender("py-missing") as s:
                    s.send_messages(ServiceBusMessage("x"))
            self.assertIn('"py-missing" does not exist', str(caught.exception))
            self.assertIn("ErrorCodes.NotFound", str(caught.exception))

    def test_wrong_key(self):
        fields = dict(f.split("=", 1) for f in CONNECTION_STRING.strip(";").split(";"))
        fields["SharedAccessKey"] = "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgISE="
        wrong = ";".join("%s=%s" % kv for kv in fields.items())
        with client(wrong) as sb:
            with self.assertRaises((ServiceBusAuthenticationError, ServiceBusAuthorizationError)):
                with sb.get_queue_sender("py-basic") as s:
                    s.send_messages(ServiceBusMessage("x"))
        # Nothing arrived.
        with client() as sb, sb.get_queue_receiver("py-basic") as r:
            self.assertEqual(r.peek_messages(max_message_count=10), [])


if __name__ == "__main__":
    unittest.main()
