package sync

import gosync "sync"

// Short strings that recur in every request (label keys and values, annotation keys, names) are made
// once and shared: decoding a 9-member request otherwise makes several hundred copies of a few dozen
// strings. The table is bounded; when full it starts again.
const (
	internMaxLen     = 64
	internMaxEntries = 4096
)

var internTable = struct {
	gosync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// interned is string(b), shared with earlier calls when b is short.
func interned(b []byte) string {
	if len(b) > internMaxLen {
		return string(b)
	}
	internTable.RLock()
	s, ok := internTable.m[string(b)] // a lookup with string(b) does not allocate
	internTable.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	internTable.Lock()
	if len(internTable.m) >= internMaxEntries {
		clear(internTable.m)
	}
	internTable.m[s] = s
	internTable.Unlock()
	return s
}
