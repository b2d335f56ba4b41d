package api

import (
	"fmt"
	"sort"
	"strings"
)

// Intent is the hook's half of a member Lease: what it asks of that member's agent. The hook renders it
// (Annotations) and the agent reads it (ParseIntent): one definition of the annotations on both sides of
// the protocol (docs/design/03-member-lease.md §3). The hook's own reading of what it observes adds the
// checks that need the cluster around (a second leave, a permission above the size: sync).
type Intent struct {
	// Kind is AnnIntent as written: IntentMember, IntentLeave, or "" before the hook first set one.
	Kind string
	// Since is AnnIntentSince (RFC 3339), when Kind was set.
	Since string
	// Seed: AnnBootstrap is BootstrapSeed (the member that bootstraps a new cluster alone).
	Seed bool
	// Static: AnnBootstrap is StaticBootstrap(Static), the member count of a static creation (every
	// member starts at once from one initial cluster); 0 none. Never set with Seed.
	Static int
	// Join is the join permission's window (AnnJoinPermitted, AnnJoinDeadline), zero when none.
	Join JoinWindow
	// Defrag: the defragmentation pass this member is asked to execute ("" none).
	Defrag string
	// Renewal: the renewal mark the member's built-in certificates must carry ("" none; RenewalMark).
	Renewal string
	// CARotation and CARestart: the CA rotation step asked, and the CAs (fingerprints) this member may
	// restart its etcd to trust.
	CARotation CARotationIntent
	CARestart  string
	// PeerScheme: the scheme this member may move its peer URL to now ("http", "https"; "" none).
	PeerScheme string
	// Recover: this member's part in a recovery from the freshest survivor (zero: none).
	Recover RecoverIntent
	// Auth: the hash of the declared auth (AnnAuthDeclared, AuthConfig.Hash; "" without spec.auth): the
	// agents read auth.json when it differs from what they hold, not on a timer.
	Auth string
}

// Annotations are the Lease annotations the hook writes for the intent: the intent and its time always
// (empty before the first), every other key only when set.
func (i Intent) Annotations() map[string]string {
	ann := map[string]string{AnnIntent: i.Kind, AnnIntentSince: i.Since}
	if !i.Join.IsZero() {
		ann[AnnJoinPermitted], ann[AnnJoinDeadline] = i.Join.Annotations()
	}
	if i.Seed {
		ann[AnnBootstrap] = BootstrapSeed
	} else if i.Static > 0 {
		ann[AnnBootstrap] = StaticBootstrap(i.Static)
	}
	set := func(k, v string) {
		if v != "" {
			ann[k] = v
		}
	}
	set(AnnDefrag, i.Defrag)
	set(AnnRenewal, i.Renewal)
	set(AnnCARotation, i.CARotation.String())
	set(AnnCARestart, i.CARestart)
	set(AnnPeerScheme, i.PeerScheme)
	set(AnnRecover, i.Recover.String())
	set(AnnAuthDeclared, i.Auth)
	return ann
}

// ParseIntent reads the intent from a Lease's annotations as the agent acts on it. Annotations can be
// edited by hand: a value the hook could not have written is left out, and problems says so (never
// fatal). An unknown Kind is kept as written: what to do with it is the reader's (the agent acts as a
// member, the hook re-derives it).
func ParseIntent(ann map[string]string) (in Intent, problems []string) {
	in = Intent{Kind: ann[AnnIntent], Since: ann[AnnIntentSince], Seed: ann[AnnBootstrap] == BootstrapSeed, Defrag: ann[AnnDefrag]}
	if n, ok, err := ParseStaticBootstrap(ann[AnnBootstrap]); err != nil {
		problems = append(problems, err.Error()+": ignored")
	} else if ok {
		in.Static = n
	}
	// written is ann[key] when the hook could have written it (valid), else "" and a problem saying what it
	// is not.
	written := func(key string, valid func(string) bool, what string) string {
		v := ann[key]
		if v == "" || valid(v) {
			return v
		}
		problems = append(problems, fmt.Sprintf("%s %q is not %s: ignored", key, v, what))
		return ""
	}
	// A mark the hook could not have written asks for nothing: a hand edit must not make every agent
	// renew at every look.
	in.Renewal = written(AnnRenewal, IsMark, "a renewal mark")
	if r, err := ParseCARotation(ann[AnnCARotation]); err != nil {
		problems = append(problems, err.Error()+": ignored")
	} else {
		in.CARotation = r
	}
	in.CARestart = written(AnnCARestart, FingerprintList, "a list of CA fingerprints")
	switch v := ann[AnnPeerScheme]; v {
	case "", "http", "https":
		in.PeerScheme = v
	default:
		problems = append(problems, fmt.Sprintf("%s %q is neither http nor https: ignored", AnnPeerScheme, v))
	}
	if r, err := ParseRecoverIntent(ann[AnnRecover]); err != nil {
		problems = append(problems, err.Error()+": ignored")
	} else {
		in.Recover = r
	}
	in.Auth = written(AnnAuthDeclared, authHashRe.MatchString, "an auth hash")
	// The window is read as the hook counts it: a permission the hook does not count starts no join.
	var p string
	if in.Join, p = ParseJoinWindow(ann[AnnJoinPermitted], ann[AnnJoinDeadline]); p != "" {
		problems = append(problems, p)
	}
	return in, problems
}

// FingerprintList: one or two CA fingerprints, sorted, comma-separated: AnnCARestart as the hook writes
// it.
func FingerprintList(v string) bool {
	parts := strings.Split(v, ",")
	if len(parts) > 2 || !sort.StringsAreSorted(parts) {
		return false
	}
	for _, p := range parts {
		if _, ok := ParseCASecretState(p); !ok || strings.Contains(p, "/") {
			return false
		}
	}
	return true
}
