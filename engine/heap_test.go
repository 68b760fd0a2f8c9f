package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// item is a heap element for the test: a key, and its position.
type item struct {
	key, id int
	idx     int32
}

type itemKey struct{}

func (itemKey) less(a, b *item) bool { return a.key < b.key || (a.key == b.key && a.id < b.id) }
func (itemKey) index(x *item) *int32 { return &x.idx }

// TestIndexedHeapKeepsOrderThroughRemovesAndRekeys pushes, removes and
// re-keys items at random, checking after each step that every item
// knows its position and that the items drain in key order.
func TestIndexedHeapKeepsOrderThroughRemovesAndRekeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h indexedHeap[*item, itemKey]
	var in []*item
	var k itemKey
	for step := range 5000 {
		switch op := rng.IntN(4); {
		case op == 0 && len(in) > 0:
			j := rng.IntN(len(in))
			h.remove(in[j])
			if h.contains(in[j]) || in[j].idx != -1 {
				t.Fatalf("step %d: removed item still at %d", step, in[j].idx)
			}
			h.remove(in[j]) // a second remove is a no-op
			in = slices.Delete(in, j, j+1)
		case op == 1 && len(in) > 0:
			x := in[rng.IntN(len(in))]
			x.key = rng.IntN(100)
			h.changed(x)
		default:
			x := &item{key: rng.IntN(100), id: step, idx: -1}
			h.push(x)
			in = append(in, x)
		}
		if h.Len() != len(in) {
			t.Fatalf("step %d: %d items, %d pushed", step, h.Len(), len(in))
		}
		for i, x := range h.items {
			if int(x.idx) != i {
				t.Fatalf("step %d: item at %d records %d", step, i, x.idx)
			}
			if p := (i - 1) / 2; i > 0 && k.less(x, h.items[p]) {
				t.Fatalf("step %d: item at %d orders before its parent", step, i)
			}
		}
	}
	want := slices.Clone(in)
	slices.SortFunc(want, func(a, b *item) int {
		if k.less(a, b) {
			return -1
		}
		return 1
	})
	for i, w := range want {
		if got := h.top(); got != w {
			t.Fatalf("drained %d: key %d id %d, want key %d id %d", i, got.key, got.id, w.key, w.id)
		}
		h.remove(h.top())
	}
	if h.top() != nil || h.Len() != 0 {
		t.Fatal("items left after draining")
	}
}
