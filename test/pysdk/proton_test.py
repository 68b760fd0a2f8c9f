"""A generic AMQP 1.0 client (Debian's python3-qpid-proton), without any
Service Bus SDK, against the same raftbusd node as servicebus_test.py: it
authenticates as the AMQP CBS draft says (a SharedAccessSignature token put
on $cbs, its answer on a link of its own named by reply-to), then sends,
receives and settles with plain AMQP outcomes.

Settings as for servicebus_test.py (RAFTBUS_PY_CONNECTION_STRING,
RAFTBUS_PY_CA).
"""

import base64
import hashlib
import hmac
import os
import time
import unittest
import urllib.parse
import uuid

from proton import Message, SSLDomain
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

CONNECTION_STRING = os.environ["RAFTBUS_PY_CONNECTION_STRING"]
CA = os.environ["RAFTBUS_PY_CA"]
FIELDS = dict(f.split("=", 1) for f in CONNECTION_STRING.strip(";").split(";"))
HOST = urllib.parse.urlparse(FIELDS["Endpoint"]).hostname


def sas_token(resource, key_name, key, ttl=3600):
    expiry = str(int(time.time()) + ttl)
    encoded = urllib.parse.quote_plus(resource)
    sig = hmac.new(key.encode(), (encoded + "\n" + expiry).encode(), hashlib.sha256).digest()
    return "SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s" % (
        encoded, urllib.parse.quote_plus(base64.b64encode(sig).decode()), expiry, key_name)


class ReplyTo(LinkOption):
    """The target address of a receiver link, which requests name as reply-to."""

    def __init__(self, address):
        self.address = address

    def apply(self, link):
        link.target.address = self.address


def connect():
    ssl = SSLDomain(SSLDomain.MODE_CLIENT)
    ssl.set_trusted_ca_db(CA)
    ssl.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    return BlockingConnection("amqps://%s:5671" % HOST, ssl_domain=ssl, sasl_enabled=True,
                              allowed_mechs="ANONYMOUS", timeout=30)


def put_token(conn, audience, token):
    replies = conn.create_receiver("$cbs", options=ReplyTo("cbs-replies"))
    requests = conn.create_sender("$cbs")
    msg_id = str(uuid.uuid4())
    requests.send(Message(id=msg_id, reply_to="cbs-replies", body=token, properties={
        "operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience}))
    answer = replies.receive()  # sent settled: nothing to accept
    requests.close()
    replies.close()
    if answer.correlation_id != msg_id:
        raise AssertionError("answer correlates %r, not the request %r" % (answer.correlation_id, msg_id))
    return answer.properties["status-code"]


class Proton(unittest.TestCase):
    def test_token_send_receive_accept(self):
        audience = "sb://%s/py-proton" % HOST
        conn = connect()
        try:
            code = put_token(conn, audience, sas_token(audience, FIELDS["SharedAccessKeyName"], FIELDS["SharedAccessKey"]))
            self.assertEqual(code, 202)
            sender = conn.create_sender("py-proton")
            for i in range(3):
                # inferred: the bytes go as a data section, the body
                # Service Bus messages have (amqp-value bodies are refused).
                sender.send(Message(body=b"plain %d" % i, inferred=True, properties={"n": i}))
            receiver = conn.create_receiver("py-proton", credit=3)
            got = []
            for _ in range(3):
                m = receiver.receive()
                got.append((m.body, m.properties["n"]))
                receiver.accept()
            self.assertEqual(sorted(got), [(b"plain %d" % i, i) for i in range(3)])
            receiver.close()
            # Accepted means completed: nothing comes again.
            again = conn.create_receiver("py-proton", credit=1)
            with self.assertRaises(Exception):
                again.receive(timeout=2)
        finally:
            conn.close()

    def test_no_token_no_send(self):
        conn = connect()
        try:
            with self.assertRaises(Exception) as caught:
                conn.create_sender("py-proton")
            self.assertIn("unauthorized", str(caught.exception).lower())
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
