package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Hook-owned Lease annotations: the intent half of a member Lease (docs/design/03-member-lease.md §3.2).
const (
	AnnIntent        = "etcd.io/intent"
	AnnIntentSince   = "etcd.io/intent-since"
	AnnJoinPermitted = "etcd.io/join-permitted"
	// AnnJoinDeadline bounds a permission: an agent never starts a join at or after it, so a timed-out
	// step cannot come back to life beside the next one.
	AnnJoinDeadline = "etcd.io/join-deadline"
	AnnBootstrap    = "etcd.io/bootstrap"
	// AnnDefrag asks the member to defragment once for the pass it names (a token); the hook writes it
	// on one member at a time (docs/design/15-maintenance.md §15.5).
	AnnDefrag = "etcd.io/defrag"
	// AnnRenewal asks the member for built-in certificates that carry this renewal mark (RenewalMark of
	// the etcd.io/renew-certificates value): one without it is renewed at once (docs/design/14-tls.md §14.7).
	AnnRenewal    = "etcd.io/renewal"
	IntentMember  = "member"
	IntentLeave   = "leave"
	BootstrapSeed = "seed"
)

// Agent-owned Lease annotations: the report half.
const (
	AnnMemberID  = "etcd.io/member-id"
	AnnClusterID = "etcd.io/cluster-id"
	// AnnClusterUID keeps its first key (docs/design/18-names.md): running agents write it and the
	// Lease admission policy binds it.
	AnnClusterUID = "etcd.io/parent-uid"
	AnnRole       = "etcd.io/role"
	AnnHealthy    = "etcd.io/healthy"
	AnnVersion    = "etcd.io/version"
	AnnError      = "etcd.io/error"
	// AnnErrorReason: Error's reason alone (one of the Reason constants), so that nobody parses it back
	// out of the text. Agents from before it existed write only AnnError (Report.Reason falls back).
	AnnErrorReason = "etcd.io/error-reason"
	AnnLeaderID    = "etcd.io/leader-id"
	AnnMembers     = "etcd.io/members"
	// With TLS: the SHA-256 fingerprints of the CAs the member trusts (comma-separated, sorted), and the
	// expiry (RFC 3339) of the earliest of them and of the member's certificate.
	AnnTLSCAs          = "etcd.io/tls-cas"
	AnnTLSCANotAfter   = "etcd.io/tls-ca-not-after"
	AnnTLSCertNotAfter = "etcd.io/tls-cert-not-after"
	// AnnTLSRenewal: the renewal mark of the built-in member certificate in use (empty: none).
	AnnTLSRenewal = "etcd.io/tls-renewal"
	// AnnRestoredFrom and AnnRestoredRevision: the snapshot the member's data was restored from.
	AnnRestoredFrom     = "etcd.io/restored-from"
	AnnRestoredRevision = "etcd.io/restored-revision"
	// AnnDBSize and AnnDBSizeInUse: the member's backend file size and the part of it in use, in bytes
	// (etcd's Status). Written when one moves by a significant step (SizeMoved), not at every write.
	AnnDBSize      = "etcd.io/db-size"
	AnnDBSizeInUse = "etcd.io/db-size-in-use"
	// AnnAlarms: the cluster's active alarms as this member reads them, "<TYPE>@<member ID>" sorted and
	// comma-separated (e.g. NOSPACE@8e9e05c52164694d); empty when none.
	AnnAlarms = "etcd.io/alarms"
	// AnnDefragging: the defragmentation pass (token) the member is executing now; AnnDefragDone: the
	// last pass it completed; AnnLastDefrag: when (RFC 3339, the agent's clock).
	AnnDefragging = "etcd.io/defragging"
	AnnDefragDone = "etcd.io/defrag-done"
	AnnLastDefrag = "etcd.io/last-defrag"
	// AnnQuota: the backend quota, in bytes, the member's etcd runs with (its --quota-backend-bytes, or
	// etcd's default): a raise of spec.maintenance.space shows here member by member (§15.6).
	AnnQuota = "etcd.io/quota-bytes"
	// AnnRevision and AnnRaftTerm: the member's revision and raft term, written only while it knows no
	// leader (writes cannot move them then): what a recovery plan compares (docs/design/19-recovery.md).
	AnnRevision = "etcd.io/revision"
	AnnRaftTerm = "etcd.io/raft-term"
	// AnnRecovered: the recovery token whose part this member carried out (forced or fenced).
	AnnRecovered = "etcd.io/recovered"
)

// NoSpacePass is the defragmentation pass token of the NOSPACE recovery (docs/design/15-maintenance.md §15.5).
const NoSpacePass = "nospace"

// OverQuota says whether a member's database file of size bytes leaves less than 1/16 of the backend
// quota free (a quota of 0: none). etcd checks each write against the file's size, not the part in
// use: a member left this full raises NOSPACE again at the next writes it receives, so the NOSPACE
// recovery defragments every such member, not only the ones that raised the alarm, and a member
// disarms its alarm only when its own file is below this line. The 1/16 covers the staleness of a
// reported size (SizeMoved: under 1/32) and a few of the largest requests etcd accepts.
func OverQuota(size, quota int64) bool {
	return quota > 0 && size > 0 && size >= quota-quota/16
}

// Alarm types etcd raises (etcdserverpb.AlarmType names).
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// Roles an agent reports.
const (
	RoleLeader  = "leader"
	RoleVoter   = "voter"
	RoleLearner = "learner"
	RoleLeft    = "left"
	RoleNone    = "none"
)

// Member is one entry of etcd's member list as an agent read it (linearizably, through a voter).
type Member struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL,omitempty"`
	Learner   bool   `json:"learner,omitempty"`
	// Started is false for a member added to the list whose etcd has never published itself.
	Started bool `json:"started"`
}

// Report is the agent-owned half of a member Lease. The agent writes it as annotations; the hook reads it.
type Report struct {
	MemberID   string
	ClusterID  string
	ClusterUID string
	Role       string
	Healthy    bool
	Version    string
	LeaderID   string
	// Error is "<Reason>: <detail>" for the last thing the agent could not do, empty when none (SetError);
	// ErrorReason is its reason.
	Error       string
	ErrorReason string
	// Members is nil when the agent has no linearizable member list to report.
	Members []Member
	// TLS: what the member's certificate files hold (all empty without TLS).
	TLSCAs          string
	TLSCANotAfter   string
	TLSCertNotAfter string
	TLSRenewal      string
	// TLSIssuer and TLSCASecret: see AnnTLSIssuer (CA rotation, docs/design/14-tls.md §14.6).
	TLSIssuer   string
	TLSCASecret string
	// RestoredFrom and RestoredRevision: the snapshot this member's data was restored from (the seed
	// of a restored cluster), empty for every other member.
	RestoredFrom     string
	RestoredRevision string
	// DBSize and DBSizeInUse in bytes; 0 when unknown (etcd not answering, or an old agent).
	DBSize      int64
	DBSizeInUse int64
	// QuotaBytes: the quota the member's etcd runs with; 0 when unknown (no quota, or an old agent).
	QuotaBytes int64
	// Revision and RaftTerm while the member knows no leader, 0 otherwise; Recovered: see AnnRecovered.
	Revision  int64
	RaftTerm  int64
	Recovered string
	// Alarms: "<TYPE>@<member ID>", sorted; nil when none.
	Alarms []string
	// Defragging, DefragDone, LastDefrag: see AnnDefragging.
	Defragging string
	DefragDone string
	LastDefrag string
	// Auth: etcd's authentication as the leader's agent reconciles it (AnnAuth); nil on other members.
	Auth *AuthReport
	// RootIdentity: the agent's own etcd calls present the root identity (AnnRootIdentity).
	RootIdentity bool
}

// SizeMoved says whether a database size moved far enough from the reported one to be written: by at
// least 1 MiB and 1/32 of the larger of the two. A member under a writer changes size at every batch;
// reporting each change would write its Lease (and wake the hook) as often as the clients write, while
// the decisions that read sizes (the quota warning, defragmentation) need a few percent.
func SizeMoved(reported, now int64) bool {
	if (reported == 0) != (now == 0) {
		return true
	}
	d, big := now-reported, max(now, reported)
	if d < 0 {
		d = -d
	}
	return d >= 1<<20 && d >= big/32
}

// AlarmTypes is the set of alarm types in alarms ("<TYPE>@<member>"), sorted.
func AlarmTypes(alarms []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range alarms {
		t, _, _ := strings.Cut(a, "@")
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Error reasons an agent reports (Report.SetError); the hook turns some into conditions.
const (
	// ReasonStarting: etcd does not answer yet; ReasonUnhealthy: it answers, not healthy;
	// ReasonPromoting: a learner's promotion failed (it retries); ReasonWaiting: the agent waits for
	// something before it can start etcd; ReasonCrashLoop: etcd failed several times in a row;
	// ReasonLeaving: leaving the cluster did not finish (it retries).
	ReasonStarting  = "Starting"
	ReasonUnhealthy = "Unhealthy"
	ReasonPromoting = "Promoting"
	ReasonWaiting   = "Waiting"
	ReasonCrashLoop = "CrashLoop"
	ReasonLeaving   = "Leaving"
	// ReasonLeaseProblem: the hook's half of the member's Lease holds a value the agent ignores.
	ReasonLeaseProblem = "LeaseProblem"

	ReasonForeignData = "ForeignData"
	ReasonParked      = "Parked"
	// ReasonWaitingForLease: the member Lease has no intent yet; ReasonWaitingForSeed: no data, the
	// cluster is not bootstrapped and the member is not the seed.
	ReasonWaitingForLease = "WaitingForLease"
	ReasonWaitingForSeed  = "WaitingForSeed"
	// ReasonWaitingForJoin is what an agent reports while it needs join-permitted to (re)join.
	ReasonWaitingForJoin = "WaitingForJoin"
	// ReasonCertificatesInvalid: the agent cannot get or use certificates (CA Secret unreadable or
	// malformed, a certificate that does not verify); etcd keeps running on the files it has.
	ReasonCertificatesInvalid = "CertificatesInvalid"
	// ReasonRestoreFailed: the seed of a restored cluster could not restore its snapshot for a cause
	// that may pass (the store did not answer); it retries with backoff, for an hour at most, and
	// starts nothing meanwhile.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonRestoreRefused: the seed's restore cannot succeed as written (nothing under the folder, a
	// point the backups do not reach, a damaged or foreign chain, refused credentials or keys), or it
	// gave up retrying; the message names the spec.restore field. The pod does not try again.
	ReasonRestoreRefused = "RestoreRefused"
	// ReasonRestartingForCA: the agent stops its etcd to start it again trusting the CAs of the CA
	// Secret (a CA rotation's step the hook allowed, docs/design/14-tls.md §14.6).
	ReasonRestartingForCA = "RestartingForCA"
	// ReasonSwitchingPeerScheme: the agent stops its etcd to move its peer URL to the other scheme and
	// start it listening there (a TLS switch's step the hook allowed, docs/design/14-tls.md §14.8).
	ReasonSwitchingPeerScheme = "SwitchingPeerScheme"
	// ReasonDefragmenting: the agent's defragmentation of its member failed or is under way; the hook
	// counts that member as busy, not as done.
	ReasonDefragmenting = "Defragmenting"
)

// FormatID renders an etcd member or cluster ID the way every etcdhook object spells it.
func FormatID(id uint64) string { return fmt.Sprintf("%016x", id) }

// ParseID reads an ID written by FormatID (or by etcdctl, which omits leading zeros).
func ParseID(s string) (uint64, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("invalid member ID %q", s)
	}
	return strconv.ParseUint(s, 16, 64)
}

// Annotations renders the report; keys with empty values are included so that an update clears them.
func (r Report) Annotations() map[string]string {
	members := ""
	if r.Members != nil {
		ms := append([]Member(nil), r.Members...)
		sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
		b, _ := json.Marshal(ms) // cannot fail: plain strings and bools
		members = string(b)
	}
	ann := map[string]string{
		AnnMemberID:    r.MemberID,
		AnnClusterID:   r.ClusterID,
		AnnClusterUID:  r.ClusterUID,
		AnnRole:        r.Role,
		AnnHealthy:     strconv.FormatBool(r.Healthy),
		AnnVersion:     r.Version,
		AnnLeaderID:    r.LeaderID,
		AnnError:       Truncate(r.Error, BoundText.Bytes),
		AnnErrorReason: r.ErrorReason,
		AnnMembers:     members,

		AnnTLSCAs:          r.TLSCAs,
		AnnTLSCANotAfter:   r.TLSCANotAfter,
		AnnTLSCertNotAfter: r.TLSCertNotAfter,
		AnnTLSRenewal:      r.TLSRenewal,
		AnnTLSIssuer:       r.TLSIssuer,
		AnnTLSCASecret:     r.TLSCASecret,

		AnnDBSize:      formatSize(r.DBSize),
		AnnDBSizeInUse: formatSize(r.DBSizeInUse),
		AnnQuota:       formatSize(r.QuotaBytes),
		AnnRevision:    formatSize(r.Revision),
		AnnRaftTerm:    formatSize(r.RaftTerm),
		AnnRecovered:   r.Recovered,
		AnnAlarms:      strings.Join(r.Alarms, ","),

		AnnDefragging:   r.Defragging,
		AnnDefragDone:   r.DefragDone,
		AnnLastDefrag:   r.LastDefrag,
		AnnAuth:         r.Auth.String(),
		AnnRootIdentity: map[bool]string{true: "true"}[r.RootIdentity],
	}
	// Only the seed of a restored cluster says where its data came from; a fact of the cluster's
	// origin, never cleared, so other members' Leases need not carry the keys.
	if r.RestoredFrom != "" {
		ann[AnnRestoredFrom], ann[AnnRestoredRevision] = r.RestoredFrom, r.RestoredRevision
	}
	return ann
}

// ParseReport reads the report from Lease annotations. A malformed member list is reported as an error
// and the list treated as absent, so a bad write can never shrink the hook's view of membership.
func ParseReport(ann map[string]string) (Report, error) { return ParseReportUsing(ann, nil) }

// ParseReportUsing is ParseReport with the member lists already parsed, by annotation value: a list
// found there is not parsed again, one parsed is added (lists may be nil). The Leases of a cluster
// mostly carry the same list; the reports then share it, so it must not be changed.
func ParseReportUsing(ann map[string]string, lists map[string][]Member) (Report, error) {
	r := Report{
		MemberID:   ann[AnnMemberID],
		ClusterID:  ann[AnnClusterID],
		ClusterUID: ann[AnnClusterUID],
		Role:       ann[AnnRole],
		Healthy:    ann[AnnHealthy] == "true",
		Version:    ann[AnnVersion],
		LeaderID:   ann[AnnLeaderID],
		Error:      ann[AnnError],
		// A reason that is not a reason's word (a hand edit) is no reason: Reason falls back to the text.
		ErrorReason: reasonWord(ann[AnnErrorReason]),

		TLSCAs:          ann[AnnTLSCAs],
		TLSCANotAfter:   ann[AnnTLSCANotAfter],
		TLSCertNotAfter: ann[AnnTLSCertNotAfter],
		TLSRenewal:      ann[AnnTLSRenewal],
		TLSIssuer:       ann[AnnTLSIssuer],
		TLSCASecret:     ann[AnnTLSCASecret],

		RestoredFrom:     ann[AnnRestoredFrom],
		RestoredRevision: ann[AnnRestoredRevision],

		// A size that does not parse, or is negative, is unknown (0): a hand edit must not raise or
		// silence the quota warning.
		DBSize:      parseSize(ann[AnnDBSize]),
		DBSizeInUse: parseSize(ann[AnnDBSizeInUse]),
		QuotaBytes:  parseSize(ann[AnnQuota]),
		Revision:    parseSize(ann[AnnRevision]),
		RaftTerm:    parseSize(ann[AnnRaftTerm]),
		Recovered:   ann[AnnRecovered],

		Defragging: ann[AnnDefragging],
		DefragDone: ann[AnnDefragDone],
		LastDefrag: ann[AnnLastDefrag],
	}
	// A report that does not decode is ignored: the status then says nothing of auth, never a wrong hash.
	r.Auth, _ = ParseAuthReport(ann[AnnAuth])
	r.RootIdentity = ann[AnnRootIdentity] == "true"
	if a := ann[AnnAlarms]; a != "" {
		// The annotation's bound (AnnotationBound) bounds the entries: each is at least 3 bytes.
		r.Alarms = strings.Split(a, ",")
	}
	if s := ann[AnnMembers]; s != "" {
		if ms, ok := lists[s]; ok {
			r.Members = ms
			return r, nil
		}
		ms, err := parseMembers(s)
		if err != nil {
			return r, fmt.Errorf("annotation %s: %w", AnnMembers, err)
		}
		r.Members = ms[:len(ms):len(ms)]
		if lists != nil {
			lists[s] = r.Members
		}
	}
	return r, nil
}

// parseMembers reads a member list within its bound (BoundMembers), and only one an agent could have
// written: at most MaxReportedMembers members, each with a member ID, a peer URL within MaxURLBytes and
// no ID twice. Anything else is a hand edit and the whole list is distrusted: a list is read whole or
// not at all, since a member left out of it could be taken as removed.
func parseMembers(s string) ([]Member, error) {
	if err := BoundMembers.Check(s); err != nil {
		return nil, err
	}
	var ms []Member
	if err := json.Unmarshal([]byte(s), &ms); err != nil {
		return nil, err
	}
	if len(ms) > MaxReportedMembers {
		return nil, fmt.Errorf("%d members, over the bound of %d", len(ms), MaxReportedMembers)
	}
	seen := make(map[uint64]bool, len(ms))
	for i, m := range ms {
		id, err := ParseID(m.ID)
		if err != nil {
			return nil, fmt.Errorf("member %d: %w", i, err)
		}
		if m.PeerURL == "" || len(m.PeerURL) > MaxURLBytes || len(m.ClientURL) > MaxURLBytes || len(m.Name) > MaxURLBytes {
			return nil, fmt.Errorf("member %s: a peer URL of 1..%d bytes is needed, and no longer client URL or name", m.ID, MaxURLBytes)
		}
		if seen[id] {
			return nil, fmt.Errorf("member %s listed twice", m.ID)
		}
		seen[id] = true
	}
	if ms == nil {
		// "null": an agent writes "" for no list, never null.
		return nil, errors.New("null is not a member list")
	}
	return ms, nil
}

// Truncate cuts s to at most n bytes on a character boundary, marking the cut: a writer keeps its
// value within the bound its reader applies (AnnotationBound), so a long message is shortened rather
// than distrusted whole (an agent's error carries its reason first).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …(cut)"
	return CutAt(s, n-len(mark)) + mark
}

// CutAt is the longest prefix of s of at most n bytes that ends on a character boundary.
func CutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func formatSize(n int64) string {
	if n <= 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func parseSize(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Reason is the reason of Error: ErrorReason, or (an agent from before it) Error's leading word.
func (r Report) Reason() string {
	if r.Error == "" {
		return ""
	}
	if r.ErrorReason != "" {
		return r.ErrorReason
	}
	reason, _, _ := strings.Cut(r.Error, ":")
	return strings.TrimSpace(reason)
}

// SetError reports what the agent could not do: reason (a Reason constant) and the detail.
func (r *Report) SetError(reason, detail string) {
	r.Error, r.ErrorReason = reason+": "+detail, reason
}

// reasonWord is s when it is a reason's word (a capital letter, then letters, at most 64), else "".
func reasonWord(s string) string {
	if s == "" || len(s) > 64 || s[0] < 'A' || s[0] > 'Z' {
		return ""
	}
	for i := range len(s) {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return ""
		}
	}
	return s
}

// IsVoter says whether the agent reports a voting member.
func (r Report) IsVoter() bool { return r.Role == RoleLeader || r.Role == RoleVoter }
