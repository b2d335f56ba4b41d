package sync

import (
	"context"
	"os"
	"testing"

	"github.com/etcdhook/etcdhook/sync/wire"
)

// BenchmarkPhases: what each phase of one 9-member sync costs: the shape pass that bounds the body,
// decoding, decide+render (each child as the answer sends it), encoding. docs/performance.md.
func BenchmarkPhases(b *testing.B) {
	body, err := os.ReadFile("../hooks/testdata/bench/nine-members-scaling.request.json")
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{Image: FixtureImage}
	b.Run("shape", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.Shape(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.Decode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	o, err := wire.Decode(body)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decide+render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Answer(context.Background(), o, fixtureNow, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		r, _ := Answer(context.Background(), o, fixtureNow, opts)
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = r.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
