package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
)

// Redact is a snapshot location fit to quote in status, Events, logs and the hook's records: user
// info, a fragment and the value of any parameter no scheme takes (a signed URL's signature, a token)
// are replaced, and a value that does not parse as a URL is not quoted at all. A location refused for
// carrying credentials must not carry them into the refusal. A location with nothing to hide is
// returned as it is.
func Redact(raw string) string {
	if Secretless(raw) {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return "(a value that is not a URL, not quoted)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "REDACTED", ""
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "REDACTED"
			return u.String()
		}
		for k, vs := range q {
			for i, v := range vs {
				switch {
				case !knownParam(k):
					vs[i] = "REDACTED"
				case k == "endpoint":
					vs[i] = Redact(v)
				}
			}
		}
		u.RawQuery = readableQuery(q)
	}
	return u.String()
}

// Secretless says whether raw carries nothing Redact would hide: it parses as a URL without user info,
// fragment or opaque part, and every parameter is one a scheme takes (an endpoint, itself secretless).
func Secretless(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.User != nil || u.Fragment != "" {
		return false
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return false
	}
	for k, vs := range q {
		if !knownParam(k) {
			return false
		}
		for _, v := range vs {
			if k == "endpoint" && !Secretless(v) {
				return false
			}
		}
	}
	return true
}

// isFingerprint: raw is a Fingerprint already (records are read back and fingerprinted again).
func isFingerprint(raw string) bool {
	h, ok := strings.CutPrefix(raw, "sha256:")
	if !ok || len(h) != 16 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func knownParam(k string) bool {
	for _, allowed := range schemeParams {
		if slices.Contains(allowed, k) {
			return true
		}
	}
	return false
}

// Fingerprint stands for a location that carries secrets where it must be remembered, not shown (the
// etcd.io/restore-from values acted on): "sha256:" and 16 hex digits of its hash. A location without
// secrets stands for itself.
func Fingerprint(raw string) string {
	if Secretless(raw) || isFingerprint(raw) {
		return raw
	}
	h := sha256.Sum256([]byte(raw))
	return "sha256:" + hex.EncodeToString(h[:8])
}
