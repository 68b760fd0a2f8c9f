// Package client is the Go SDK for raftbus, shaped like the Azure SDK for Go
// (azservicebus): a Client, Senders, Receivers, SessionReceivers and a
// Processor. It talks to the cluster only through the public gRPC API in
// proto/raftbus/v1 and never imports server packages.
package client
