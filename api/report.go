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
