package api

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// ParseVersion reads by hand what it read with a regexp and fmt.Sscan before.
func TestParseVersionAsRegexp(t *testing.T) {
	re := regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	old := func(s string) (SemVer, bool) {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return SemVer{}, false
		}
		var v SemVer
		fmt.Sscan(m[1], &v.Major)
		fmt.Sscan(m[2], &v.Minor)
		fmt.Sscan(m[3], &v.Patch)
		return v, true
	}
	for _, s := range []string{"", "3.6.16", "0.0.0", "3.6", "3.6.16.1", "v3.6.16", "03.6.1", "3.06.1", "3.6.01", "3.6.x",
		"3..1", ".3.1", "3.1.", "3.6.16\n", " 3.6.16", "99999999999999999999.1.2", "3.6.1-rc.0", "١.٢.٣", "3.6.+1", "3.6.-1"} {
		want, wantOK := old(s)
		got, err := ParseVersion(s)
		require.Equal(t, wantOK, err == nil, "%q", s)
		require.Equal(t, want, got, "%q", s)
		if err == nil {
			require.Equal(t, fmt.Sprintf("%d.%d.%d", got.Major, got.Minor, got.Patch), got.String())
		}
	}
}

// The measurement behind keeping ParseVersion (issue 25 item 4 asked for apimachinery's util/version,
// measured first): it parses a member's version on every sync for every member.
func BenchmarkParseVersion(b *testing.B) {
	b.Run("ParseVersion", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseVersion("3.6.16"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("util/version.ParseSemantic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := utilversion.ParseSemantic("3.6.16"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
