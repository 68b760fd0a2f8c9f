package sas

import (
	"strings"
	"testing"
	"time"
)

// The token of the Service Bus documentation's reference implementation
// (Python: quote_plus of the URI, HMAC-SHA256 keyed with the key's text,
// base64), computed independently.
const (
	docURI    = "sb://contoso.servicebus.windows.net/orders"
	docKey    = "abc123+/=xyzKEY"
	docExpiry = 1893456000
	docToken  = "SharedAccessSignature sr=sb%3A%2F%2Fcontoso.servicebus.windows.net%2Forders&sig=ft5aefh%2Bnq3pWFxOYHxWzuZkUfffldLcpPjLwWAaeuQ%3D&se=1893456000&skn=RootManageSharedAccessKey"
)

func TestSignMatchesServiceBus(t *testing.T) {
	if got := Sign(docURI, "RootManageSharedAccessKey", docKey, time.Unix(docExpiry, 0)); got != docToken {
		t.Fatalf("token\n%s\nwant\n%s", got, docToken)
	}
	tok, err := Parse(docToken)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Verify(docKey) || tok.Verify(docKey+"x") {
		t.Fatal("verify")
	}
	if tok.KeyName != "RootManageSharedAccessKey" || tok.Resource != docURI || tok.Expiry.Unix() != docExpiry {
		t.Fatalf("parsed %+v", tok)
	}
	if p, err := tok.ResourcePath(); err != nil || p != "orders" {
		t.Fatalf("resource path %q, %v", p, err)
	}
	for res, want := range map[string]string{
		"sb://n1,n2/": "", "sb://n1:7400,n2/t/subscriptions/s/": "t/subscriptions/s",
		"https://n1:5300": "", "https://n1:5300?api-version=2024-05": "",
		"https://n1:5300/orders?api-version=2024-05": "orders", "https://n1/$Resources/Queues?&%24top=10#x": "$Resources/Queues",
	} {
		tok, _ := Parse(Sign(res, "k", "key", time.Unix(docExpiry, 0)))
		if p, err := tok.ResourcePath(); err != nil || p != want {
			t.Fatalf("resource path of %s: %q, %v; want %q", res, p, err, want)
		}
	}
}

func TestTamperedTokensDoNotVerify(t *testing.T) {
	for name, token := range map[string]string{
		"later expiry":   strings.Replace(docToken, "se=1893456000", "se=1993456000", 1),
		"other resource": strings.Replace(docToken, "%2Forders", "%2Fother", 1),
	} {
		tok, err := Parse(token)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tok.Verify(docKey) {
			t.Fatalf("%s: verified", name)
		}
	}
}

func TestMalformedTokensAreRefused(t *testing.T) {
	for _, token := range []string{
		"", "Bearer x", "SharedAccessSignature sr=a&sig=b", "SharedAccessSignature sr=a&sig=%%&se=1&skn=k",
		"SharedAccessSignature sr=a&sig=AAAA&se=soon&skn=k", "SharedAccessSignature sr=a&sr=b&sig=AAAA&se=1&skn=k",
	} {
		if _, err := Parse(token); err == nil {
			t.Errorf("%q parsed", token)
		}
	}
}

func TestConnectionStrings(t *testing.T) {
	cs, err := ParseConnectionString("Endpoint=sb://127.0.0.1:7401,n2/;SharedAccessKeyName=app;SharedAccessKey=k=;EntityPath=orders")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cs.Addresses, " ") != "127.0.0.1:7401 n2:7400" || cs.KeyName != "app" || cs.Key != "k=" || cs.EntityPath != "orders" {
		t.Fatalf("parsed %+v", cs)
	}
	for _, bad := range []string{
		"SharedAccessKeyName=app;SharedAccessKey=k",
		"Endpoint=sb://h/;SharedAccessKeyName=app",
		"Endpoint=sb://h/;SharedAccessKeyName=app;SharedAccessKey=k;SharedAccessSignature=t",
		"Endpoint=nohost;SharedAccessKeyName=app;SharedAccessKey=k",
	} {
		if _, err := ParseConnectionString(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
