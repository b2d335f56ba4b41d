package sync

import (
	"context"
	"os"
	"testing"
)

// BenchmarkPhases: what each phase of one 9-member sync costs (issue 25 item 5 budgets the whole at 2,000
// allocations): check, decode, decide+render (canonical child JSON included), encode. docs/performance.md.
func BenchmarkPhases(b *testing.B) {
	body, err := os.ReadFile("../hooks/testdata/bench/nine-members-scaling.request.json")
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{Image: FixtureImage}
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := CheckBody(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	cb, _, _ := CheckBody(body)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeChecked(cb); err != nil {
				b.Fatal(err)
			}
		}
	})
	o, _ := DecodeChecked(cb)
	b.Run("decide+render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r, err := Answer(context.Background(), o, fixtureNow, opts)
			if err != nil {
				b.Fatal(err)
			}
			r.Release()
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
