// Package facts reads a decoded request (wire.Observed) once into Facts: the hook's records, the member
// Leases judged against the hook's clock, the cluster ID, the member list (Truth), the Jobs, the alarms
// and the in-place restore record (InPlace). Every input is bounded and validated here while it is read,
// and every input distrusted is named in Facts.Distrusted (InputIgnored); see
// docs/design/05-request.md and docs/design/08-safety-rules.md. Read is the only writer: the decision
// (package sync) reads Facts and records its own notes.
//
// It imports only api, internal packages, sync/wire and libraries; never sync nor sync/render.
package facts
