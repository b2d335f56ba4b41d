package api

import (
	"fmt"
	"strconv"
	"strings"
)

// SemVer is an etcd release version. It is not apimachinery's util/version: that parser accepts what a
// spec.version must not hold (a leading "v", pre-releases) and costs 5 allocations and 500 ns a parse
// against none and 30 ns (BenchmarkParseVersion), for every member's version on every sync, which
// would take the sync past its allocation budget (docs/performance.md).
type SemVer struct{ Major, Minor, Patch int }

// ParseVersion parses "X.Y.Z" (a leading "v" is refused: spec.version holds the bare number).
func ParseVersion(s string) (SemVer, error) {
	// Three dot-separated decimal numbers without leading zeros, read by hand: this runs for every
	// member's report on every sync (a regexp and fmt.Sscan cost a hundred allocations a sync).
	var v SemVer
	rest := s
	for i, part := range [...]*int{&v.Major, &v.Minor, &v.Patch} {
		num := rest
		if i < 2 {
			var ok bool
			if num, rest, ok = strings.Cut(rest, "."); !ok {
				return SemVer{}, fmt.Errorf("%q is not a version of the form 3.6.16", s)
			}
		}
		if !decimal(num) {
			return SemVer{}, fmt.Errorf("%q is not a version of the form 3.6.16", s)
		}
		if n, err := strconv.Atoi(num); err == nil { // out of range: 0, as fmt.Sscan left it
			*part = n
		}
	}
	return v, nil
}

// decimal: digits, no leading zero (but "0").
func decimal(s string) bool {
	if s == "" || s[0] == '0' && len(s) > 1 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (v SemVer) String() string {
	return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Patch)
}

// Less orders versions.
func (v SemVer) Less(w SemVer) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}
