// Package steps holds the decision's values: what one sync decided (Decision), as status reports it,
// and the waits it gives (Wait). Package sync fills them; package render renders them (render.Status),
// so neither reaches into the other: below it steps imports only facts (and api, internal/pki).
package steps
