package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every report annotation reads alike: empty is no report, a value that does not decode or that its
// reader refuses is no report with the error, any other is the report.
func TestParseReports(t *testing.T) {
	parsers := map[string]func(string) (any, error){
		"backup":     func(s string) (any, error) { return nonNil(ParseBackupReport(s)) },
		"continuous": func(s string) (any, error) { return nonNil(ParseContinuousReport(s)) },
		"copy":       func(s string) (any, error) { return nonNil(ParseCopyReport(s)) },
		"restore":    func(s string) (any, error) { return nonNil(ParseRestoreReport(s)) },
		"auth":       func(s string) (any, error) { return nonNil(ParseAuthReport(s)) },
	}
	const at = `"time":"2026-11-27T07:30:00Z"`
	for _, tc := range []struct {
		parser, in string
		want       string // "" = a report; "-" = no report, no error
	}{
		{"backup", "", "-"},
		{"backup", "{", "unexpected end"},
		{"backup", `{}`, "no time"},
		{"backup", `{` + at + `,"revision":3}`, ""},
		{"continuous", "", "-"},
		{"continuous", `[]`, "cannot unmarshal"},
		{"continuous", `{"revision":3}`, "no time"},
		{"continuous", `{` + at + `,"revision":3,"chainStart":5}`, "not in the chain"},
		{"continuous", `{` + at + `,"revision":5,"chainStart":5}`, "without its time"},
		{"continuous", `{` + at + `,"revision":5,"chainStart":5,"revisionTime":"2026-11-27T07:31:00Z"}`, "after the report's own time"},
		{"continuous", `{` + at + `,"revision":5,"chainStart":5,"revisionTime":"2026-11-27T07:29:00Z"}`, ""},
		{"copy", "", "-"},
		{"copy", `{"copied":1}`, "no time"},
		{"copy", `{` + at + `,"pruned":-1}`, "negative counts"},
		{"copy", `{` + at + `,"copied":1}`, ""},
		{"restore", "", "-"},
		{"restore", `{"job":"j","outcome":"Restored"}`, "no time"},
		{"restore", `{` + at + `,"outcome":"Restored"}`, "no job"},
		{"restore", `{` + at + `,"job":"j","outcome":"Maybe"}`, "unknown outcome Maybe"},
		{"restore", `{` + at + `,"job":"j","outcome":"Restored"}`, ""},
		{"auth", "", "-"},
		{"auth", `[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]`, "nested deeper"},
		{"auth", `{"enabled":"yes"}`, "cannot unmarshal"},
		{"auth", `{"enabled":true}`, ""},
	} {
		r, err := parsers[tc.parser](tc.in)
		switch tc.want {
		case "":
			require.NoError(t, err, "%s %q", tc.parser, tc.in)
			require.NotNil(t, r, "%s %q", tc.parser, tc.in)
		case "-":
			require.NoError(t, err, "%s %q", tc.parser, tc.in)
			require.Nil(t, r, "%s %q", tc.parser, tc.in)
		default:
			require.ErrorContains(t, err, tc.want, "%s %q", tc.parser, tc.in)
			require.Nil(t, r, "%s %q", tc.parser, tc.in)
		}
	}
}

// nonNil is a parser's report as an any that is nil when the report is (a nil *R in an any is not).
func nonNil[R any](r *R, err error) (any, error) {
	if r == nil {
		return nil, err
	}
	return r, err
}
