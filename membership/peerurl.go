package membership

import "strings"

// Peer URLs through a TLS switch: a member's peer URL changes scheme (http, https) and stays the same
// member at the same address.

// samePeer compares peer URLs without their scheme: a member whose peer URL was changed from http to
// https (or back, a TLS switch) is still the member at that address, and its volume must not be deleted.
func samePeer(a, b string) bool {
	strip := func(u string) string {
		for _, p := range []string{"https://", "http://"} {
			if strings.HasPrefix(u, p) {
				return u[len(p):]
			}
		}
		return u
	}
	return strip(a) == strip(b)
}

// withScheme is url with scheme ("http" or "https") in place of its own.
func withScheme(url, scheme string) string {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	return scheme + "://" + rest
}

// schemeOf is the scheme of url: https, or http for anything else.
func schemeOf(url string) string {
	if strings.HasPrefix(url, "https://") {
		return "https"
	}
	return "http"
}
