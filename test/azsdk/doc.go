// Package azsdk tests raftbus's AMQP front door with the official Azure
// Service Bus SDK for Go, unmodified, against real raftbusd processes. It
// is a module of its own so that the raftbus module does not depend on
// the Azure SDK.
package azsdk
