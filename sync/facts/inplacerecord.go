package facts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// The in-place restore record the ConfigMap keeps, and its phases. What the facts say about it is
// inplace.go; the decision's side sync/inplace.go.

// maxRemembered bounds the record's lists (values seen, cluster IDs retired): the oldest go first.
const maxRemembered = 16

// InPlaceRecord is the ConfigMap's record of in-place restores (api.ConfigKeyRestoreInPlace): the last
// one (Request empty when there was none, or the last was withdrawn before any other ran) and the memory
// every restore adds to (Seen, Retired).
type InPlaceRecord struct {
	// Request is the source of the last restore: the etcd.io/restore-from value, or <destination>/latest
	// for an automatic one.
	Request string `json:"request,omitempty"`
	// Point is the etcd.io/restore-to value asked with it (backup.Point.Value), "" for the snapshot as
	// it is; Target the revision its verification found the keyspace at: what the restore Job restores.
	Point  string `json:"point,omitempty"`
	Target int64  `json:"target,omitempty"`
	// Retired are the cluster IDs restores replaced, this one's included (the IDs known when it
	// started), newest last: no report, member list or data directory of theirs counts again.
	Retired []string `json:"retired,omitempty"`
	// Committed: the restore Job succeeded, ordinal 0's volume holds the snapshot. From here on the
	// restore finishes whatever the annotation says.
	Committed bool `json:"committed,omitempty"`
	// Done: a healthy voter of the restored cluster reports; the cluster grows back as in any scale-up.
	Done bool `json:"done,omitempty"`
	// Lost names the members that ran without their data when spec.backup.restoreOnQuorumLoss started
	// this restore (empty for one the annotation asked for).
	Lost []string `json:"lost,omitempty"`
	// Seen are the etcd.io/restore-from values acted on (carried out, refused or withdrawn), newest
	// last: a value is acted on once, whatever came after it.
	Seen []string `json:"seen,omitempty"`
	// Refused is the last value refused and why (shown while the annotation holds it).
	Refused    string `json:"refused,omitempty"`
	RefusedWhy string `json:"refusedWhy,omitempty"`
	// RefusedLost: the refused value was restoreOnQuorumLoss's (not the annotation's): no automatic
	// restore starts from it again until restoreOnQuorumLoss is switched off and on.
	RefusedLost bool `json:"refusedLost,omitempty"`
	// Verifying: the verify Job checks the snapshot while the cluster serves. Replacing are the cluster
	// IDs live when the restore started: retired (moved to Retired) only once the snapshot passed, so
	// that nothing is judged differently, and nothing stops, before.
	Verifying bool     `json:"verifying,omitempty"`
	Replacing []string `json:"replacing,omitempty"`
	// Snapshot and SHA256 are the snapshot the verification passed: the restore Job restores exactly
	// that one (a "latest" that moved on meanwhile still finds it by its hash).
	Snapshot string `json:"snapshot,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	// AcceptCluster is the etcd.io/restore-foreign-cluster value when the restore started.
	AcceptCluster string `json:"acceptCluster,omitempty"`
	// Prior is the record this restore replaced, kept until it commits: a restore withdrawn before its
	// data was replaced goes back to it (its retired IDs, its last restore).
	Prior *InPlaceRecord `json:"prior,omitempty"`
}

// inFlight: a restore that has not finished.
func (r *InPlaceRecord) InFlight() bool { return r != nil && r.Request != "" && !r.Done }

// scrub keeps only fingerprints of values that carry secrets, in the record and the one it may go back
// to: an older hook wrote them whole, and quoted a refused one whole in RefusedWhy.
func (r *InPlaceRecord) scrub() {
	for ; r != nil; r = r.Prior {
		for i, v := range r.Seen {
			r.Seen[i] = backup.Fingerprint(v)
		}
		if r.Refused != "" && backup.Fingerprint(r.Refused) != r.Refused {
			r.Refused = backup.Fingerprint(r.Refused)
			r.RefusedWhy = "refused (its reason quoted the value, which carries secrets, and is not kept)"
		}
		if r.Request != "" && !backup.Secretless(r.Request) {
			// Never started (a value with secrets is refused): not a request to carry on with.
			r.Request = ""
		}
	}
}

// seen: v was acted on. Values are remembered by backup.Fingerprint: one that carries secrets (user
// info, a signature) is remembered by its hash, never written into the record or status.
func (r *InPlaceRecord) seen(v string) bool {
	return r != nil && slices.Contains(r.Seen, backup.Fingerprint(v))
}

// key identifies one restore: its request and the IDs it replaces. The Job's name and the restored
// cluster's token derive from it, so a second restore of the same source (the automatic restore of a
// second disaster, from the same /latest) gets another Job and other member and cluster IDs.
func (r *InPlaceRecord) Key() string {
	// The IDs it replaces, retired or not yet (while Verifying): one key from its start to its end.
	return askKey(r.Request, r.Point) + " " + strings.Join(remember(r.Retired, r.Replacing...), ",")
}

// point is the record's point (the zero point without one, or one that does not parse: pointProblem
// refuses the record that holds it when it is read).
func (r *InPlaceRecord) ParsedPoint() backup.Point {
	p, _ := backup.ParsePoint(r.Point)
	return p
}

// pointProblem says why a record's point cannot be the hook's own ("" when it can): a hand edit.
func (r *InPlaceRecord) pointProblem() string {
	for ; r != nil; r = r.Prior {
		if p, err := backup.ParsePoint(r.Point); err != nil || p.Value() != r.Point {
			return fmt.Sprintf("point %q is not one the hook writes", r.Point)
		}
		if r.Target < 0 || r.Target > 0 && r.Point == "" {
			return fmt.Sprintf("target revision %d without a point, or below 0", r.Target)
		}
	}
	return ""
}

// memory is the record without its last restore: what a new one starts from.
func (r *InPlaceRecord) memory() *InPlaceRecord {
	if r == nil {
		return &InPlaceRecord{}
	}
	return &InPlaceRecord{Retired: slices.Clone(r.Retired), Seen: slices.Clone(r.Seen)}
}

// withoutPrior is the record as a new restore keeps it to go back to.
func (r *InPlaceRecord) withoutPrior() *InPlaceRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Prior = nil
	return &c
}

// remember appends values not already present, keeping the newest maxRemembered.
func remember(list []string, values ...string) []string {
	out := slices.Clone(list)
	for _, v := range values {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) > maxRemembered {
		out = out[len(out)-maxRemembered:]
	}
	return out
}

// back is the record a restore not committed goes back to when it is withdrawn or refused (its data was
// never replaced): the one before it, with every value seen kept. live gains the IDs the abandoned
// restore retired that were live then: they are live again.
func (r *InPlaceRecord) back(live []string) (*InPlaceRecord, []string) {
	back := r.Prior
	if back == nil {
		back = r.memory()
		back.Retired = nil
	}
	back = back.withoutPrior()
	back.Seen = remember(r.Seen)
	for _, id := range r.Retired {
		if !slices.Contains(back.Retired, id) {
			live = remember(live, id)
		}
	}
	return back, live
}

// In-place restore phases, as status.restore.phase shows them.
const (
	InPlaceVerifying = "Verifying"
	InPlaceStopping  = "Stopping"
	InPlaceRestoring = "Restoring"
	InPlaceStarting  = "Starting"
	InPlaceRestored  = "Restored"
)
