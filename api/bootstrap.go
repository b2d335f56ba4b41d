package api

import (
	"fmt"
	"strconv"
	"strings"
)

// A cluster is bootstrapped in one of two ways (docs/design/07-steps.md §7.1): by a seed that starts a
// one-member cluster which the others then join one at a time, or, at a creation with no evidence of
// earlier data anywhere, by every member at once from one static initial cluster of N members. The
// etcd.io/bootstrap value says which: BootstrapSeed on the seed's Lease, StaticBootstrap(N) on the
// StatefulSet (the record), in agent.json and on every member's Lease.
const staticPrefix = "static/"

// StaticBootstrap is the etcd.io/bootstrap value of a static creation of n members.
func StaticBootstrap(n int) string { return staticPrefix + strconv.Itoa(n) }

// ParseStaticBootstrap reads a StaticBootstrap value. ok is false for a value that is not one (a seed
// mark, "", anything else); err says why a value that claims to be one is not valid: a static creation
// has 2..MaxSize members (a single member is the seed's bootstrap).
func ParseStaticBootstrap(v string) (n int, ok bool, err error) {
	rest, found := strings.CutPrefix(v, staticPrefix)
	if !found {
		return 0, false, nil
	}
	n, err = strconv.Atoi(rest)
	if err != nil || n < 2 || n > MaxSize || rest != strconv.Itoa(n) {
		return 0, true, fmt.Errorf("%s %q is not static/N with N from 2 to %d", AnnBootstrap, v, MaxSize)
	}
	return n, true, nil
}
