package enginev1_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	enginev1 "github.com/raftbus/raftbus/proto/raftbus/engine/v1"
)

// Replicas decode log entries with the generated UnmarshalVT (see
// partition's fsm). It must read back exactly what proto.Marshal wrote, for
// every kind of command and every field, or replicas would apply something
// else than what was proposed.
func TestGeneratedDecoderReadsWhatProtobufWrote(t *testing.T) {
	body := (&enginev1.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("body")
	if body == nil || body.Fields().Len() == 0 {
		t.Fatal("Command has no oneof body")
	}
	entry := &enginev1.Entry{}
	for i := range body.Fields().Len() {
		cmd := &enginev1.Command{}
		populate(cmd.ProtoReflect(), 0, i)
		if field := body.Fields().Get(i); !cmd.ProtoReflect().Has(field) {
			t.Fatalf("populate left %s unset", field.Name())
		}
		entry.Commands = append(entry.Commands, cmd)
	}
	data, err := proto.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	var got enginev1.Entry
	if err := got.UnmarshalVT(data); err != nil {
		t.Fatalf("UnmarshalVT: %v", err)
	}
	if !proto.Equal(&got, entry) {
		t.Fatalf("UnmarshalVT read back another entry than was written:\ngot  %v\nwant %v", &got, entry)
	}
	// Malformed input is refused, as proto.Unmarshal refuses it.
	for cut := 1; cut < len(data) && cut < 4096; cut += 97 {
		var want, got enginev1.Entry
		if proto.Unmarshal(data[:cut], &want) != nil && got.UnmarshalVT(data[:cut]) == nil {
			t.Fatalf("UnmarshalVT accepted the first %d bytes of an entry, which proto.Unmarshal refuses", cut)
		}
	}
}

// populate sets every field of m to a value that is not the default, its
// messages recursively (to a few levels), lists to two elements, maps to
// one entry, and in each oneof the field at choice (modulo its size).
func populate(m protoreflect.Message, depth, choice int) {
	if depth > 4 {
		return
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if o.Fields().Get(choice%o.Fields().Len()) != f {
				continue
			}
		}
		switch {
		case f.IsMap():
			mp := m.Mutable(f).Map()
			key := scalar(f.MapKey(), i)
			if f.MapValue().Kind() == protoreflect.MessageKind {
				v := mp.NewValue()
				populate(v.Message(), depth+1, choice)
				mp.Set(key.MapKey(), v)
			} else {
				mp.Set(key.MapKey(), scalar(f.MapValue(), i))
			}
		case f.IsList():
			list := m.Mutable(f).List()
			for j := range 2 {
				if f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind {
					v := list.NewElement()
					populate(v.Message(), depth+1, choice+j)
					list.Append(v)
				} else {
					list.Append(scalar(f, i+j))
				}
			}
		case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
			populate(m.Mutable(f).Message(), depth+1, choice)
		default:
			m.Set(f, scalar(f, i))
		}
	}
}

// scalar is a value of f's kind that is not its default.
func scalar(f protoreflect.FieldDescriptor, n int) protoreflect.Value {
	n++
	switch f.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		values := f.Enum().Values()
		return protoreflect.ValueOfEnum(values.Get(n % values.Len()).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-n * 1000))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(-n) << 40)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n) << 20)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n) << 50)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.25)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("värde " + string(f.Name()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0, byte(n), 0xff})
	}
	panic("unknown kind " + f.Kind().String())
}
