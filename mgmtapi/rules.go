package mgmtapi

import (
	"encoding/base64"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	raftbusv1 "github.com/raftbus/raftbus/proto/raftbus/v1"
)

// A RuleDescription is a raftbus.v1.RuleProperties: a Filter whose i:type
// says which of the four filters it is, an Action (EmptyRuleAction or
// SqlRuleAction), and the parameters and correlation properties as lists
// of KeyValueOfstringanyType, each value with its xsd type.

// sqlCompatibilityLevel is what Service Bus writes for its SQL filters
// and actions.
const sqlCompatibilityLevel = "20"

// The SQL expressions Service Bus writes for the true and false filters.
const (
	trueExpression  = "1=1"
	falseExpression = "1=0"
)

// readRule reads a RuleDescription (or a subscription's
// DefaultRuleDescription) into the rule called name. Without a Filter
// the rule takes every message, as a Service Bus rule does.
func readRule(desc *element, name string) (*raftbusv1.RuleProperties, error) {
	rule := &raftbusv1.RuleProperties{Name: name, Filter: &raftbusv1.RuleFilter{}}
	f := desc.child("Filter")
	kind := f.instanceType()
	if f != nil && kind == "" {
		// A body written by hand may leave the type out: what the
		// filter holds tells.
		kind = "CorrelationFilter"
		if f.child("SqlExpression") != nil {
			kind = "SqlFilter"
		}
	}
	switch kind {
	case "", "TrueFilter":
		rule.Filter.Filter = &raftbusv1.RuleFilter_TrueFilter{TrueFilter: &raftbusv1.TrueFilter{}}
	case "FalseFilter":
		rule.Filter.Filter = &raftbusv1.RuleFilter_FalseFilter{FalseFilter: &raftbusv1.FalseFilter{}}
	case "SqlFilter":
		expr := f.child("SqlExpression").value()
		if strings.TrimSpace(expr) == "" {
			return nil, fmt.Errorf("the SqlFilter needs an SqlExpression")
		}
		params, err := readKeyValues(f.child("Parameters"), "SqlFilter Parameters")
		if err != nil {
			return nil, err
		}
		rule.Filter.Filter = &raftbusv1.RuleFilter_SqlFilter{SqlFilter: &raftbusv1.SqlFilter{SqlExpression: expr, Parameters: params}}
	case "CorrelationFilter":
		cf := &raftbusv1.CorrelationFilter{}
		if err := readProperties(correlationProperties, f, cf.ProtoReflect()); err != nil {
			return nil, fmt.Errorf("CorrelationFilter %v", err)
		}
		props, err := readKeyValues(f.child("Properties"), "CorrelationFilter Properties")
		if err != nil {
			return nil, err
		}
		cf.ApplicationProperties = props
		rule.Filter.Filter = &raftbusv1.RuleFilter_CorrelationFilter{CorrelationFilter: cf}
	default:
		return nil, fmt.Errorf("filter type %q is not supported: SqlFilter, CorrelationFilter, TrueFilter or FalseFilter", kind)
	}
	a := desc.child("Action")
	switch kind := a.instanceType(); kind {
	case "", "EmptyRuleAction":
		if kind == "" && a.child("SqlExpression") != nil {
			break // a hand-written SQL action without its type
		}
		return rule, nil
	case "SqlRuleAction":
	default:
		return nil, fmt.Errorf("action type %q is not supported: SqlRuleAction or EmptyRuleAction", kind)
	}
	expr := a.child("SqlExpression").value()
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("the SqlRuleAction needs an SqlExpression")
	}
	params, err := readKeyValues(a.child("Parameters"), "SqlRuleAction Parameters")
	if err != nil {
		return nil, err
	}
	rule.Action = &raftbusv1.SqlRuleAction{SqlExpression: expr, Parameters: params}
	return rule, nil
}

// writeRule writes r as a RuleDescription.
func writeRule(w *xmlWriter, r *raftbusv1.RuleProperties, d *description) {
	w.open("RuleDescription", "xmlns", nsServiceBus, "xmlns:i", nsInstance)
	switch f := r.GetFilter().GetFilter().(type) {
	case *raftbusv1.RuleFilter_SqlFilter:
		w.open("Filter", "i:type", "SqlFilter")
		writeSQL(w, f.SqlFilter.GetSqlExpression(), f.SqlFilter.GetParameters())
		w.close("Filter")
	case *raftbusv1.RuleFilter_CorrelationFilter:
		w.open("Filter", "i:type", "CorrelationFilter")
		cf := f.CorrelationFilter
		writeProperties(w, correlationProperties, &description{settings: cf.ProtoReflect(), version: d.version})
		writeKeyValues(w, "Properties", cf.GetApplicationProperties())
		w.close("Filter")
	case *raftbusv1.RuleFilter_FalseFilter:
		w.open("Filter", "i:type", "FalseFilter")
		writeSQL(w, falseExpression, nil)
		w.close("Filter")
	default:
		w.open("Filter", "i:type", "TrueFilter")
		writeSQL(w, trueExpression, nil)
		w.close("Filter")
	}
	// Always an Action: the SDKs read one whether or not the rule has one.
	if a := r.GetAction(); a.GetSqlExpression() != "" {
		w.open("Action", "i:type", "SqlRuleAction")
		writeSQL(w, a.GetSqlExpression(), a.GetParameters())
		w.close("Action")
	} else {
		w.empty("Action", "i:type", "EmptyRuleAction")
	}
	w.leaf("CreatedAt", formatTime(timeOf(r.GetCreatedAt())))
	w.leaf("Name", r.GetName())
	w.close("RuleDescription")
}

func writeSQL(w *xmlWriter, expr string, params map[string]*raftbusv1.PropertyValue) {
	w.leaf("SqlExpression", expr)
	w.leaf("CompatibilityLevel", sqlCompatibilityLevel)
	if len(params) > 0 {
		writeKeyValues(w, "Parameters", params)
	}
}

// The xsd types of KeyValueOfstringanyType values and the PropertyValue
// each is.
func readValue(typ, text string) (*raftbusv1.PropertyValue, error) {
	t := strings.TrimSpace(text)
	pv := &raftbusv1.PropertyValue{}
	var err error
	parseInt := func(bits int) int64 {
		var n int64
		n, err = strconv.ParseInt(t, 10, bits)
		return n
	}
	parseUint := func(bits int) uint64 {
		var n uint64
		n, err = strconv.ParseUint(t, 10, bits)
		return n
	}
	switch typ {
	case "", "string":
		pv.Value = &raftbusv1.PropertyValue_StringValue{StringValue: text}
	case "int":
		// The Go SDK writes every integer as an int, whatever its size.
		n := parseInt(64)
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			pv.Value = &raftbusv1.PropertyValue_Int32Value{Int32Value: int32(n)}
		} else {
			pv.Value = &raftbusv1.PropertyValue_IntValue{IntValue: n}
		}
	case "long":
		pv.Value = &raftbusv1.PropertyValue_IntValue{IntValue: parseInt(64)}
	case "short":
		pv.Value = &raftbusv1.PropertyValue_Int16Value{Int16Value: int32(parseInt(16))}
	case "byte":
		pv.Value = &raftbusv1.PropertyValue_Int8Value{Int8Value: int32(parseInt(8))}
	case "unsignedByte":
		pv.Value = &raftbusv1.PropertyValue_Uint8Value{Uint8Value: uint32(parseUint(8))}
	case "unsignedShort":
		pv.Value = &raftbusv1.PropertyValue_Uint16Value{Uint16Value: uint32(parseUint(16))}
	case "unsignedInt":
		pv.Value = &raftbusv1.PropertyValue_Uint32Value{Uint32Value: uint32(parseUint(32))}
	case "unsignedLong":
		pv.Value = &raftbusv1.PropertyValue_Uint64Value{Uint64Value: parseUint(64)}
	case "double", "float":
		var f float64
		bits := 64
		if typ == "float" {
			bits = 32
		}
		if f, err = strconv.ParseFloat(t, bits); err == nil {
			if typ == "float" {
				pv.Value = &raftbusv1.PropertyValue_FloatValue{FloatValue: float32(f)}
			} else {
				pv.Value = &raftbusv1.PropertyValue_DoubleValue{DoubleValue: f}
			}
		}
	case "boolean":
		var b bool
		b, err = parseBool(t)
		pv.Value = &raftbusv1.PropertyValue_BoolValue{BoolValue: b}
	case "dateTime":
		ts, perr := parseTime(t)
		err = perr
		pv.Value = &raftbusv1.PropertyValue_TimestampValue{TimestampValue: timestamppb.New(ts)}
	case "base64Binary":
		var b []byte
		b, err = base64.StdEncoding.DecodeString(t)
		pv.Value = &raftbusv1.PropertyValue_BytesValue{BytesValue: b}
	case "duration":
		return nil, fmt.Errorf("duration values are not supported: raftbus properties have no time span type")
	default:
		return nil, fmt.Errorf("value type %q is not supported", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid %s", text, typ)
	}
	return pv, nil
}

// writeValue is the xsd type and text of v.
func writeValue(v *raftbusv1.PropertyValue) (typ, text string) {
	switch x := v.GetValue().(type) {
	case *raftbusv1.PropertyValue_StringValue:
		return "string", x.StringValue
	case *raftbusv1.PropertyValue_Int32Value:
		return "int", strconv.FormatInt(int64(x.Int32Value), 10)
	case *raftbusv1.PropertyValue_IntValue:
		return "long", strconv.FormatInt(x.IntValue, 10)
	case *raftbusv1.PropertyValue_Int16Value:
		return "short", strconv.FormatInt(int64(x.Int16Value), 10)
	case *raftbusv1.PropertyValue_Int8Value:
		return "byte", strconv.FormatInt(int64(x.Int8Value), 10)
	case *raftbusv1.PropertyValue_Uint8Value:
		return "unsignedByte", strconv.FormatUint(uint64(x.Uint8Value), 10)
	case *raftbusv1.PropertyValue_Uint16Value:
		return "unsignedShort", strconv.FormatUint(uint64(x.Uint16Value), 10)
	case *raftbusv1.PropertyValue_Uint32Value:
		return "unsignedInt", strconv.FormatUint(uint64(x.Uint32Value), 10)
	case *raftbusv1.PropertyValue_Uint64Value:
		return "unsignedLong", strconv.FormatUint(x.Uint64Value, 10)
	case *raftbusv1.PropertyValue_DoubleValue:
		return "double", strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *raftbusv1.PropertyValue_FloatValue:
		return "float", strconv.FormatFloat(float64(x.FloatValue), 'g', -1, 32)
	case *raftbusv1.PropertyValue_BoolValue:
		return "boolean", formatBool(x.BoolValue)
	case *raftbusv1.PropertyValue_TimestampValue:
		return "dateTime", formatTime(x.TimestampValue.AsTime())
	case *raftbusv1.PropertyValue_BytesValue:
		return "base64Binary", base64.StdEncoding.EncodeToString(x.BytesValue)
	}
	return "string", ""
}

// readKeyValues reads a list of KeyValueOfstringanyType; nil for none.
func readKeyValues(list *element, what string) (map[string]*raftbusv1.PropertyValue, error) {
	if list == nil || len(list.children) == 0 {
		return nil, nil
	}
	out := make(map[string]*raftbusv1.PropertyValue, len(list.children))
	for _, kv := range list.children {
		if kv.name.Local != "KeyValueOfstringanyType" {
			continue
		}
		key := kv.child("Key").value()
		if key == "" {
			return nil, fmt.Errorf("%s: an entry has no Key", what)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s: key %q is given twice", what, key)
		}
		val := kv.child("Value")
		if val == nil {
			return nil, fmt.Errorf("%s: %q has no Value", what, key)
		}
		pv, err := readValue(val.instanceType(), val.value())
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", what, key, err)
		}
		out[key] = pv
	}
	return out, nil
}

// writeKeyValues writes props as the list element name, keys sorted so
// that answers are stable.
func writeKeyValues(w *xmlWriter, name string, props map[string]*raftbusv1.PropertyValue) {
	if len(props) == 0 {
		w.empty(name)
		return
	}
	w.open(name)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		typ, text := writeValue(props[k])
		w.open("KeyValueOfstringanyType")
		w.leaf("Key", k)
		w.leaf("Value", text, "i:type", "d6p1:"+typ, "xmlns:d6p1", nsSchema)
		w.close("KeyValueOfstringanyType")
	}
	w.close(name)
}
