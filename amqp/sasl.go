package amqp

import (
	"bytes"
	"fmt"
)

const (
	codeSASLMechanisms = 0x40
	codeSASLInit       = 0x41
	codeSASLOutcome    = 0x44

	saslOK   uint8 = 0
	saslAuth uint8 = 1
)

type saslMechanisms struct{ Mechanisms []Symbol }

func (p *saslMechanisms) described() any {
	return describedList(codeSASLMechanisms, p.Mechanisms)
}

type saslOutcome struct{ Code uint8 }

func (p *saslOutcome) described() any { return describedList(codeSASLOutcome, p.Code) }

// SASLCredentials are what a client presented: the mechanism and, for
// PLAIN, the user name and password.
type SASLCredentials struct {
	Mechanism Symbol
	Username  string
	Password  string
}

// sasl runs the server side of the SASL layer: offer MSSBCBS, ANONYMOUS
// and PLAIN, read the client's choice, let authenticate decide. MSSBCBS
// is Service Bus' mechanism for "the client authenticates later, with
// tokens on $cbs": the only one the .NET SDK offers, and the one uamqp
// (under the Python SDK) asks for. It carries no credentials.
func (c *conn) sasl() error {
	if err := c.writeRaw(headerSASL[:]); err != nil {
		return err
	}
	if err := c.writeFrame(frameTypeSASL, 0, &saslMechanisms{Mechanisms: []Symbol{"MSSBCBS", "ANONYMOUS", "PLAIN"}}, nil); err != nil {
		return err
	}
	f, err := c.fr.read()
	if err != nil {
		return fmt.Errorf("sasl-init: %w", err)
	}
	if f.Type != frameTypeSASL {
		return malformed("frame type %d during SASL", f.Type)
	}
	v, _, err := Unmarshal(f.Body)
	if err != nil {
		return fmt.Errorf("sasl-init: %w", err)
	}
	r, err := composite(v, codeSASLInit, "sasl-init")
	if err != nil {
		return err
	}
	cred := SASLCredentials{Mechanism: r.symbol(0)}
	resp := r.binary(1)
	if r.err != nil {
		return r.err
	}
	code := saslOK
	switch cred.Mechanism {
	case "ANONYMOUS", "MSSBCBS":
	case "PLAIN":
		// authzid NUL authcid NUL password
		parts := bytes.SplitN(resp, []byte{0}, 3)
		if len(parts) != 3 {
			code = saslAuth
			break
		}
		cred.Username, cred.Password = string(parts[1]), string(parts[2])
	default:
		code = saslAuth
	}
	if code == saslOK && c.srv.Authenticate != nil && !c.srv.Authenticate(cred) {
		code = saslAuth
	}
	if err := c.writeFrame(frameTypeSASL, 0, &saslOutcome{Code: code}, nil); err != nil {
		return err
	}
	if code != saslOK {
		return fmt.Errorf("sasl: %s refused", cred.Mechanism)
	}
	c.credentials = cred
	return nil
}
