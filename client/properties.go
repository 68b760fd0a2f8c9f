package client

import raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"

// PropertiesToProto is props in the API's form, as messages carry them
// (for front doors that take properties in other places, such as a
// correlation filter's over AMQP).
func PropertiesToProto(props map[string]any) (map[string]*raftbusv1.PropertyValue, error) {
	return toProtoProperties(props)
}

// PropertiesFromProto is the inverse of PropertiesToProto.
func PropertiesFromProto(props map[string]*raftbusv1.PropertyValue) map[string]any {
	return fromProtoProperties(props)
}
