"""The Python SDK's ServiceBusAdministrationClient (Debian's python3-azure),
unmodified, against a raftbusd node's management REST API (ATOM over HTTPS)
with TLS and access policies. management_test.go starts the node and runs
this file with Debian's python3; run alone, it reads the same settings from
the environment:

  RAFTBUS_PY_ADMIN_CONNECTION_STRING  the root policy's connection string,
                                      with the node's management listener
                                      (sb://localhost:<port>/) as endpoint
  RAFTBUS_PY_CONNECTION_STRING        the same for AMQP (port 5671), to
                                      send the messages the counts count
  RAFTBUS_PY_CA                       the CA certificate the node's is
                                      issued by (REQUESTS_CA_BUNDLE too,
                                      for the administration client)
"""

import datetime
import os
import unittest
import uuid

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

ADMIN_CONNECTION_STRING = os.environ["RAFTBUS_PY_ADMIN_CONNECTION_STRING"]
CONNECTION_STRING = os.environ["RAFTBUS_PY_CONNECTION_STRING"]
CA = os.environ["RAFTBUS_PY_CA"]


def admin(connection_string=ADMIN_CONNECTION_STRING, **kwargs):
    return ServiceBusAdministrationClient.from_connection_string(connection_string, **kwargs)


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


class Queues(unittest.TestCase):
    def setUp(self):
        self.admin = admin()
        self.addCleanup(self.admin.close)

    def test_create_get_update_list_delete(self):
        name = unique("pm-queue")
        created = self.admin.create_queue(
            name,
            lock_duration=datetime.timedelta(seconds=30),
            max_delivery_count=5,
            default_message_time_to_live=datetime.timedelta(hours=1),
            dead_lettering_on_message_expiration=True,
            duplicate_detection_history_time_window=datetime.timedelta(minutes=2),
            max_size_in_megabytes=2048,
        )
        self.assertEqual(created.name, name)
        self.assertEqual(created.lock_duration, datetime.timedelta(seconds=30))
        self.assertEqual(created.max_delivery_count, 5)

        q = self.admin.get_queue(name)
        self.assertEqual(q.lock_duration, datetime.timedelta(seconds=30))
        self.assertEqual(q.max_delivery_count, 5)
        self.assertEqual(q.default_message_time_to_live, datetime.timedelta(hours=1))
        self.assertTrue(q.dead_lettering_on_message_expiration)
        self.assertEqual(q.duplicate_detection_history_time_window, datetime.timedelta(minutes=2))
        self.assertEqual(q.max_size_in_megabytes, 2048)
        self.assertFalse(q.requires_session)
        self.assertFalse(q.enable_partitioning)
        self.assertEqual(q.status, "Active")

        # The SDK's update sends back everything get_queue read.
        q.max_delivery_count = 7
        q.lock_duration = datetime.timedelta(seconds=45)
        self.admin.update_queue(q)
        q = self.admin.get_queue(name)
        self.assertEqual(q.max_delivery_count, 7)
        self.assertEqual(q.lock_duration, datetime.timedelta(seconds=45))
        self.assertEqual(q.default_message_time_to_live, datetime.timedelta(hours=1))

        self.assertIn(name, [x.name for x in self.admin.list_queues()])
        self.admin.delete_queue(name)
        with self.assertRaises(ResourceNotFoundError):
            self.admin.get_queue(name)
        self.assertNotIn(name, [x.name for x in self.admin.list_queues()])

    def test_defaults_are_service_bus_defaults(self):
        name = unique("pm-defaults")
        self.admin.create_queue(name)
        q = self.admin.get_queue(name)
        self.assertEqual(q.lock_duration, datetime.timedelta(minutes=1))
        self.assertEqual(q.max_delivery_count, 10)
        # "No limit" is TimeSpan.MaxValue, as Service Bus answers it.
        self.assertGreater(q.default_message_time_to_live, datetime.timedelta(days=10000000))
        self.admin.delete_queue(name)

    def test_create_of_an_existing_queue_conflicts(self):
        name = unique("pm-twice")
        self.admin.create_queue(name)
        with self.assertRaises(ResourceExistsError):
            self.admin.create_queue(name)
        self.admin.delete_queue(name)

    def test_missing_entities_are_not_found(self):
        with self.assertRaises(ResourceNotFoundError):
            self.admin.get_queue("pm-missing")
        with self.assertRaises(ResourceNotFoundError):
            self.admin.get_topic("pm-missing")
        with self.assertRaises(ResourceNotFoundError):
            self.admin.delete_queue("pm-missing")

    def test_list_pages_through_every_queue(self):
        names = sorted(unique("pm-page") for _ in range(5))
        for n in names:
            self.admin.create_queue(n)
        listed = [q.name for q in self.admin.list_queues(max_page_size=2)]
        for n in names:
            self.assertIn(n, listed)
        self.assertEqual(len(listed), len(set(listed)))
        for n in names:
            self.admin.delete_queue(n)

    def test_api_version_2017_04(self):
        old = admin(api_version="2017-04")
        self.addCleanup(old.close)
        name = unique("pm-old")
        old.create_queue(name, max_delivery_count=3)
        self.assertEqual(old.get_queue(name).max_delivery_count, 3)
        old.delete_queue(name)

    def test_namespace_properties(self):
        ns = self.admin.get_namespace_properties()
        self.assertEqual(ns.name, "localhost")
        self.assertEqual(ns.messaging_sku, "Standard")

    def test_a_wrong_key_is_refused(self):
        wrong = ADMIN_CONNECTION_STRING.split(";SharedAccessKey=")[0] + ";SharedAccessKey=d3Jvbmc="
        with admin(wrong) as refused, self.assertRaises(HttpResponseError) as e:
            refused.get_queue("pm-any")
        self.assertEqual(e.exception.status_code, 401)
        self.assertNotIsInstance(e.exception, ResourceNotFoundError)


class RuntimeProperties(unittest.TestCase):
    def setUp(self):
        self.admin = admin()
        self.addCleanup(self.admin.close)
        self.sb = ServiceBusClient.from_connection_string(CONNECTION_STRING, connection_verify=CA, retry_total=0)

    def tearDown(self):
        self.sb.close()

    def test_queue_counts_after_sends(self):
        name = unique("pm-counts")
        self.admin.create_queue(name)
        with self.sb.get_queue_sender(name) as s:
            s.send_messages([ServiceBusMessage("m%d" % i) for i in range(3)])
            s.schedule_messages(ServiceBusMessage("later"), datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
        with self.sb.get_queue_receiver(name) as r:
            (m,) = r.receive_messages(max_message_count=1, max_wait_time=10)
            r.dead_letter_message(m, reason="test")
        rt = self.admin.get_queue_runtime_properties(name)
        self.assertEqual(rt.active_message_count, 2)
        self.assertEqual(rt.scheduled_message_count, 1)
        self.assertEqual(rt.dead_letter_message_count, 1)
        self.assertEqual(rt.transfer_message_count, 0)
        self.assertEqual(rt.transfer_dead_letter_message_count, 0)
        self.assertEqual(rt.total_message_count, 4)
        self.assertGreater(rt.size_in_bytes, 0)
        self.assertIsNotNone(rt.created_at_utc)
        self.assertGreaterEqual(rt.updated_at_utc, rt.created_at_utc)
        # raftbus's runtime properties do not track the last access yet:
        # it reads as never, as Service Bus writes it.
        self.assertIsNotNone(rt.accessed_at_utc)
        listed = {q.name: q for q in self.admin.list_queues_runtime_properties()}
        self.assertEqual(listed[name].active_message_count, 2)
        self.admin.delete_queue(name)

    def test_subscription_counts_after_sends(self):
        topic = unique("pm-count-topic")
        self.admin.create_topic(topic)
        self.admin.create_subscription(topic, "all")
        self.admin.create_subscription(topic, "none")
        self.admin.delete_rule(topic, "none", "$Default")
        with self.sb.get_topic_sender(topic) as s:
            s.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        self.assertEqual(self.admin.get_subscription_runtime_properties(topic, "all").active_message_count, 2)
        self.assertEqual(self.admin.get_subscription_runtime_properties(topic, "none").active_message_count, 0)
        self.assertEqual(self.admin.get_topic_runtime_properties(topic).subscription_count, 2)
        listed = {s.name: s for s in self.admin.list_subscriptions_runtime_properties(topic)}
        self.assertEqual(listed["all"].total_message_count, 2)
        self.admin.delete_topic(topic)


class TopicsSubscriptionsRules(unittest.TestCase):
    def setUp(self):
        self.admin = admin()
        self.addCleanup(self.admin.close)
        self.topic = unique("pm-topic")
        self.admin.create_topic(self.topic, default_message_time_to_live=datetime.timedelta(minutes=30))

    def tearDown(self):
        self.admin.delete_topic(self.topic)

    def test_topic_and_subscription_lifecycle(self):
        t = self.admin.get_topic(self.topic)
        self.assertEqual(t.default_message_time_to_live, datetime.timedelta(minutes=30))
        t.default_message_time_to_live = datetime.timedelta(minutes=40)
        self.admin.update_topic(t)
        self.assertEqual(self.admin.get_topic(self.topic).default_message_time_to_live, datetime.timedelta(minutes=40))
        self.assertIn(self.topic, [x.name for x in self.admin.list_topics()])

        s = self.admin.create_subscription(self.topic, "audit", lock_duration=datetime.timedelta(seconds=20), max_delivery_count=4)
        self.assertEqual(s.name, "audit")
        s = self.admin.get_subscription(self.topic, "audit")
        self.assertEqual(s.lock_duration, datetime.timedelta(seconds=20))
        self.assertEqual(s.max_delivery_count, 4)
        s.max_delivery_count = 6
        self.admin.update_subscription(self.topic, s)
        self.assertEqual(self.admin.get_subscription(self.topic, "audit").max_delivery_count, 6)
        self.assertEqual([x.name for x in self.admin.list_subscriptions(self.topic)], ["audit"])
        with self.assertRaises(ResourceExistsError):
            self.admin.create_subscription(self.topic, "audit")
        self.admin.delete_subscription(self.topic, "audit")
        with self.assertRaises(ResourceNotFoundError):
            self.admin.get_subscription(self.topic, "audit")

    def test_rules_with_each_filter(self):
        self.admin.create_subscription(self.topic, "s")
        self.admin.create_rule(
            self.topic, "s", "sql",
            filter=SqlRuleFilter("color = @color AND size > 3", parameters={"@color": "red"}),
            action=SqlRuleAction("SET sys.Label = 'matched'"),
        )
        self.admin.create_rule(
            self.topic, "s", "corr",
            filter=CorrelationRuleFilter(correlation_id="order-1", label="created", properties={"region": "eu", "n": 5}),
        )
        self.admin.create_rule(self.topic, "s", "all", filter=TrueRuleFilter())
        self.admin.create_rule(self.topic, "s", "nothing", filter=FalseRuleFilter())

        sql = self.admin.get_rule(self.topic, "s", "sql")
        self.assertIsInstance(sql.filter, SqlRuleFilter)
        self.assertEqual(sql.filter.sql_expression, "color = @color AND size > 3")
        self.assertEqual(sql.filter.parameters, {"@color": "red"})
        self.assertIsInstance(sql.action, SqlRuleAction)
        self.assertEqual(sql.action.sql_expression, "SET sys.Label = 'matched'")

        corr = self.admin.get_rule(self.topic, "s", "corr")
        self.assertIsInstance(corr.filter, CorrelationRuleFilter)
        self.assertEqual(corr.filter.correlation_id, "order-1")
        self.assertEqual(corr.filter.label, "created")
        self.assertEqual(corr.filter.properties, {"region": "eu", "n": 5})
        self.assertIsNone(corr.action)

        self.assertIsInstance(self.admin.get_rule(self.topic, "s", "all").filter, TrueRuleFilter)
        self.assertIsInstance(self.admin.get_rule(self.topic, "s", "nothing").filter, FalseRuleFilter)

        names = sorted(r.name for r in self.admin.list_rules(self.topic, "s"))
        self.assertEqual(names, ["$Default", "all", "corr", "nothing", "sql"])

        sql.filter = SqlRuleFilter("size > 10")
        sql.action = None
        self.admin.update_rule(self.topic, "s", sql)
        sql = self.admin.get_rule(self.topic, "s", "sql")
        self.assertEqual(sql.filter.sql_expression, "size > 10")
        self.assertIsNone(sql.action)

        with self.assertRaises(ResourceExistsError):
            self.admin.create_rule(self.topic, "s", "all")
        self.admin.delete_rule(self.topic, "s", "corr")
        with self.assertRaises(ResourceNotFoundError):
            self.admin.get_rule(self.topic, "s", "corr")
        with self.assertRaises(HttpResponseError) as e:
            self.admin.create_rule(self.topic, "s", "broken", filter=SqlRuleFilter("color = = 'red'"))
        self.assertEqual(e.exception.status_code, 400)

    def test_rules_filter_what_the_subscription_gets(self):
        self.admin.create_subscription(self.topic, "red")
        self.admin.delete_rule(self.topic, "red", "$Default")
        self.admin.create_rule(self.topic, "red", "red", filter=SqlRuleFilter("color = 'red'"))
        with ServiceBusClient.from_connection_string(CONNECTION_STRING, connection_verify=CA, retry_total=0) as sb:
            with sb.get_topic_sender(self.topic) as s:
                s.send_messages([ServiceBusMessage("r", application_properties={"color": "red"}),
                                 ServiceBusMessage("b", application_properties={"color": "blue"})])
        self.assertEqual(self.admin.get_subscription_runtime_properties(self.topic, "red").active_message_count, 1)


if __name__ == "__main__":
    unittest.main()
