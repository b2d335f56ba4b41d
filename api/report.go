package api

import "encoding/json"

// parseReport reads a report annotation into an R, the one decoding every report shares: empty is no
// report (nil), and so is a value that does not decode or that check refuses (nil, with the error: a
// hand edit, or a writer of another version). check may be nil when every decoded value is a report.
func parseReport[R any](s string, check func(*R) error) (*R, error) {
	if s == "" {
		return nil, nil
	}
	var r R
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(&r); err != nil {
			return nil, err
		}
	}
	return &r, nil
}

// reportMessage is a report's message cut to fit in the annotation's bound (BoundReportJSON) with room
// for the other fields and escaping: JSON escapes a byte into at most 6.
func reportMessage(m string) string { return Truncate(m, BoundReportJSON.Bytes/8) }

// reportJSON renders a report for its annotation.
func reportJSON(r any) string {
	b, _ := json.Marshal(r) // the reports' plain fields: cannot fail
	return string(b)
}
