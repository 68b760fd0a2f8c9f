package pysdk

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/raftbus/raftbus/internal/await"
	"github.com/raftbus/raftbus/internal/sas"
	"github.com/raftbus/raftbus/test/procs"
)

// The Python SDK's ServiceBusAdministrationClient, unmodified, manages a
// node with TLS and access policies over its management REST API: the
// scenarios are management_test.py, which also sends over AMQP the
// messages whose counts it reads.
func TestPythonAdministrationClient(t *testing.T) {
	if out, err := exec.Command(python, "-c", "import azure.servicebus.management").CombinedOutput(); err != nil {
		t.Fatalf("Debian's python3-azure is needed (apt-get install python3-azure; scripts/test.sh installs it): %v\n%s", err, out)
	}
	c := procs.StartWith(t, bin, 1, procs.Options{TLS: true, Auth: true, AMQPAddr: amqpAddr})
	await.Until(t, 30*time.Second, "the node to write the root key", func() bool { return c.RootConnectionString() != "" })
	root, err := sas.ParseConnectionString(c.RootConnectionString())
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(c.Nodes[0].ManagementAddr)
	if err != nil {
		t.Fatal(err)
	}
	ca := c.CertFiles("test").CA
	env := append(os.Environ(),
		// The node's certificate names localhost.
		"RAFTBUS_PY_ADMIN_CONNECTION_STRING="+sas.String("sb://localhost:"+port+"/", root.KeyName, root.Key),
		"RAFTBUS_PY_CONNECTION_STRING="+sas.String("sb://localhost/", root.KeyName, root.Key),
		"RAFTBUS_PY_CA="+ca,
		// The administration client verifies the node's certificate
		// with what requests is told; it takes no CA of its own.
		"REQUESTS_CA_BUNDLE="+ca)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "management_test")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("management_test: %v\n%s", err, out)
	}
	t.Logf("%s", summary(out))
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("skipped scenarios:\n%s", out)
	}
}
