package sync

import (
	"sort"
)

// Small generic helpers the whole package uses.

// sortedKeys returns a map's int or string keys in order, so every loop is deterministic.
func sortedKeys[K int | string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

func ptr[T any](v T) *T { return &v }
