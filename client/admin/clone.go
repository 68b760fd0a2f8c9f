package admin

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// clone copies props so that setting the name does not change the
// caller's value; nil yields empty.
func clone[T proto.Message](props T, empty T) T {
	if any(props) == nil || !props.ProtoReflect().IsValid() {
		return empty
	}
	return proto.Clone(props).(T)
}

// overlay sets every field populated in src on dst. Updates send the
// current settings with the caller's changes laid over them, so a setting
// the caller left unset keeps its value whatever the server does with an
// unset field.
func overlay[T proto.Message](dst, src T) T {
	d := dst.ProtoReflect()
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
	return dst
}
