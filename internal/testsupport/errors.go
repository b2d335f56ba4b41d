// Package testsupport holds the helpers that the tests of several etcdhook packages share. It is
// imported by tests only.
package testsupport

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FailedAsWanted checks err against a table case that wants an error containing want, or none when
// want is empty. It reports whether the case failed as wanted: then there is no result to check and
// the caller returns; otherwise err was nil and the caller goes on to check the result.
func FailedAsWanted(t testing.TB, err error, want string) bool {
	t.Helper()
	if want != "" {
		require.ErrorContains(t, err, want)
		return true
	}
	require.NoError(t, err)
	return false
}
