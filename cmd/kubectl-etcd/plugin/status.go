package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
)

// Snapshot is what `status` shows: the EtcdCluster's status as the hook wrote it and the reports the
// agents wrote into the member Leases. It is also the -o json document.
type Snapshot struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	// Status is the status object as stored, field for field: fields this plugin does not know yet
	// (added by a newer hook) are kept.
	Status map[string]any `json:"status"`
	// MemberLeases are the agents' reports, by ordinal; LeaseError says why they are missing.
	MemberLeases []LeaseReport `json:"memberLeases"`
	LeaseError   string        `json:"leaseError,omitempty"`

	status  api.ClusterStatus // Status, typed
	tlsSpec *bool             // spec.security.tls.enabled as stored (nil: unset)
}

// LeaseReport is one member Lease: who holds it, when it was last renewed, and the agent's report
// (api.ParseReport), in the annotations' own words.
type LeaseReport struct {
	Name            string     `json:"name"`
	Pod             string     `json:"pod"`
	Holder          string     `json:"holderIdentity,omitempty"`
	RenewTime       *time.Time `json:"renewTime,omitempty"`
	MemberID        string     `json:"memberID,omitempty"`
	ClusterID       string     `json:"clusterID,omitempty"`
	Role            string     `json:"role,omitempty"`
	Healthy         bool       `json:"healthy"`
	Version         string     `json:"version,omitempty"`
	LeaderID        string     `json:"leaderID,omitempty"`
	Error           string     `json:"error,omitempty"`
	TLSCertNotAfter string     `json:"tlsCertNotAfter,omitempty"`
	TLSCANotAfter   string     `json:"tlsCANotAfter,omitempty"`
	ReportError     string     `json:"reportError,omitempty"`
	ordinal         int
}

// getCluster reads the EtcdCluster.
func getCluster(ctx context.Context, c *Clients, name string) (*unstructured.Unstructured, error) {
	return c.Dynamic.Resource(GVR).Namespace(c.Namespace).Get(ctx, name, metav1.GetOptions{})
}

// annotate sets one annotation on the EtcdCluster with a merge patch (no read first, no conflict with
// the status Metacontroller writes); a nil value removes it.
func annotate(ctx context.Context, c *Clients, name, key string, value *string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{key: value}}})
	_, err := c.Dynamic.Resource(GVR).Namespace(c.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// annotateAll sets (nil: removes) several annotations in one merge patch.
func annotateAll(ctx context.Context, c *Clients, name string, values map[string]*string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
	_, err := c.Dynamic.Resource(GVR).Namespace(c.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// snapshotOf decodes an EtcdCluster object (without the Leases).
func snapshotOf(u *unstructured.Unstructured) (*Snapshot, error) {
	s := &Snapshot{Namespace: u.GetNamespace(), Name: u.GetName(), Generation: u.GetGeneration()}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	if st == nil {
		st = map[string]any{}
	}
	s.Status = st
	// The converter ignores fields the api types do not declare (a newer hook's): they stay in Status.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &s.status); err != nil {
		return nil, fmt.Errorf("EtcdCluster %s/%s: status: %w", s.Namespace, s.Name, err)
	}
	s.ObservedGeneration = s.status.ObservedGeneration
	if on, found, err := unstructured.NestedBool(u.Object, "spec", "security", "tls", "enabled"); found && err == nil {
		s.tlsSpec = &on
	}
	return s, nil
}

// getSnapshot reads the EtcdCluster and decodes it (without the Leases).
func getSnapshot(ctx context.Context, c *Clients, name string) (*Snapshot, error) {
	u, err := getCluster(ctx, c, name)
	if err != nil {
		return nil, err
	}
	return snapshotOf(u)
}

// load reads the EtcdCluster and its member Leases. The Leases are extra: without permission to list
// them the status is still shown, with the reason they are not.
func load(ctx context.Context, c *Clients, name string) (*Snapshot, error) {
	s, err := getSnapshot(ctx, c, name)
	if err != nil {
		return nil, err
	}
	s.MemberLeases = []LeaseReport{}
	n := api.Names{Cluster: name, Namespace: c.Namespace}
	sel := labels.SelectorFromSet(labels.Set{api.LabelInstance: name, api.LabelComponent: api.ComponentEtcd, api.LabelManagedBy: api.ManagedBy})
	leases, err := c.Kube.CoordinationV1().Leases(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		s.LeaseError = err.Error()
		return s, nil
	}
	for i := range leases.Items {
		if r, ok := leaseReport(n, &leases.Items[i]); ok {
			s.MemberLeases = append(s.MemberLeases, r)
		}
	}
	sort.Slice(s.MemberLeases, func(i, j int) bool { return s.MemberLeases[i].ordinal < s.MemberLeases[j].ordinal })
	return s, nil
}

func leaseReport(n api.Names, l *coordinationv1.Lease) (LeaseReport, bool) {
	i := n.LeaseOrdinal(l.Name)
	if i < 0 {
		return LeaseReport{}, false
	}
	r := LeaseReport{Name: l.Name, Pod: n.Pod(i), ordinal: i}
	if l.Spec.HolderIdentity != nil {
		r.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		t := l.Spec.RenewTime.UTC()
		r.RenewTime = &t
	}
	rep, err := api.ParseReport(l.Annotations)
	if err != nil {
		r.ReportError = err.Error()
	}
	r.MemberID, r.ClusterID, r.Role, r.Healthy = rep.MemberID, rep.ClusterID, rep.Role, rep.Healthy
	r.Version, r.LeaderID, r.Error = rep.Version, rep.LeaderID, rep.Error
	r.TLSCertNotAfter, r.TLSCANotAfter = rep.TLSCertNotAfter, rep.TLSCANotAfter
	return r, true
}

// writeJSON prints the snapshot as indented JSON.
func writeJSON(w io.Writer, s *Snapshot) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func condition(st *api.ClusterStatus, typ string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// settled is what --wait waits for: the hook has seen the current spec, and the cluster is Running and
// Available.
func (s *Snapshot) settled() bool {
	av := condition(&s.status, api.CondAvailable)
	return s.status.Phase == api.PhaseRunning && av != nil && av.Status == metav1.ConditionTrue &&
		s.ObservedGeneration >= s.Generation
}

// inFlight is the step the hook is working on and why, from the Progressing condition.
func (s *Snapshot) inFlight() string {
	p := condition(&s.status, api.CondProgressing)
	switch {
	case p == nil:
		return "unknown (no Progressing condition)"
	case p.Status == metav1.ConditionTrue:
		return join(p.Reason, p.Message)
	case p.Reason == "Stable" || p.Reason == "":
		return "none"
	default: // Waiting, StepDeadlineExceeded: nothing moves, and the message says why
		return join("not progressing, "+p.Reason, p.Message)
	}
}

func join(a, b string) string {
	if b == "" {
		return clean(a)
	}
	return clean(a) + ": " + clean(b)
}

// voters counts healthy voters and voters in the status.
func (s *Snapshot) voters() (healthy, all int) {
	for _, m := range s.status.Members {
		if m.Role == api.RoleLeader || m.Role == api.RoleVoter {
			all++
			if m.Healthy {
				healthy++
			}
		}
	}
	return
}

// dbSizes reads status.members[].dbSize, which a later hook adds (issue 10: per member dbSize and
// dbSizeInUse); the api types do not declare it yet, so it is read from the stored object and shown
// only when present.
func (s *Snapshot) dbSizes() map[string]string {
	ms, _, _ := unstructured.NestedSlice(s.Status, "members")
	out := map[string]string{}
	for _, m := range ms {
		mm, ok := m.(map[string]any)
		if !ok {
			continue
		}
		name, _ := mm["name"].(string)
		if v, ok := mm["dbSize"]; ok && name != "" {
			out[name] = formatSize(v)
			if use, ok := mm["dbSizeInUse"]; ok {
				out[name] += " (" + formatSize(use) + " in use)"
			}
		}
	}
	return out
}

// formatSize renders a byte count (a JSON number) in binary units; anything else (a quantity string)
// as it is.
func formatSize(v any) string {
	var b float64
	switch x := v.(type) {
	case int64:
		b = float64(x)
	case float64:
		b = x
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		b = f
	default:
		return fmt.Sprint(v)
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	}
	return strconv.FormatFloat(b, 'f', 1, 64) + " " + units[i]
}

// age renders how long before now t was (or how long after, for expiries), kubectl-style.
func age(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < 2*time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d.Hours()))
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if neg {
		return "-" + s
	}
	return s
}

func expiry(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "not reported"
	}
	left := t.Sub(now)
	if left <= 0 {
		return fmt.Sprintf("%s (EXPIRED %s ago)", t.UTC().Format(time.RFC3339), age(-left))
	}
	return fmt.Sprintf("%s (in %s)", t.UTC().Format(time.RFC3339), age(left))
}

// lastBackup: the newest snapshot, when and at which revision.
func lastBackup(b *api.BackupStatus, now time.Time) string {
	if b.LastSuccessTime == nil {
		return "none yet"
	}
	return fmt.Sprintf("%s (%s ago), revision %d, %d bytes: %s", b.LastSuccessTime.UTC().Format(time.RFC3339),
		age(now.Sub(b.LastSuccessTime.Time)), b.Revision, b.Size, dash(b.LastSnapshot))
}

// storageLine: the member claims against spec.storage.size, and a growth under way.
// dashPrefix is "; msg", or "" for an empty msg.
func dashPrefix(msg string) string {
	if msg == "" {
		return ""
	}
	return "; " + msg
}

func storageLine(v *api.StorageStatus) string {
	out := fmt.Sprintf("%s per member; %d of %d claims at size", v.Size, v.AtSize, v.Claims)
	if v.Growing != "" {
		out += "; growing " + v.Growing
	}
	if v.TemplateSize != "" && v.TemplateSize != v.Size {
		out += fmt.Sprintf("; new claims start at %s until the StatefulSet is re-created", v.TemplateSize)
	}
	return out
}

// memberRow is one line of the members table: a member of the status (the hook's membership truth),
// or an ordinal whose Lease exists without a member (a pod waiting to join, a member that left).
type memberRow struct {
	name, id, role, healthy, version, leader, dbSize, report string
}

func (s *Snapshot) memberRows(now time.Time) []memberRow {
	byPod := map[string]*LeaseReport{}
	for i := range s.MemberLeases {
		byPod[s.MemberLeases[i].Pod] = &s.MemberLeases[i]
	}
	sizes := s.dbSizes()
	seen := map[string]bool{}
	var rows []memberRow
	for _, m := range s.status.Members {
		seen[m.Name] = true
		r := memberRow{name: m.Name, id: m.ID, role: m.Role, healthy: strconv.FormatBool(m.Healthy), version: dash(m.Version),
			dbSize: dash(sizes[m.Name]), report: leaseSummary(byPod[m.Name], now)}
		if m.Role == api.RoleLeader || (s.status.Leader != "" && s.status.Leader == m.Name) {
			r.leader = "*"
		}
		rows = append(rows, r)
	}
	for i := range s.MemberLeases {
		l := &s.MemberLeases[i]
		if seen[l.Pod] {
			continue
		}
		rows = append(rows, memberRow{name: l.Pod, id: dash(l.MemberID), role: "(" + dash(l.Role) + ")", healthy: strconv.FormatBool(l.Healthy),
			version: dash(l.Version), dbSize: dash(sizes[l.Pod]), report: leaseSummary(l, now)})
	}
	return rows
}

// leaseSummary is the agent's own word on its member: its error (what it waits for) or ok, and how old
// the report is.
func leaseSummary(l *LeaseReport, now time.Time) string {
	if l == nil {
		return "no Lease"
	}
	what := "ok"
	if l.Error != "" {
		what = clean(l.Error)
	}
	if l.ReportError != "" {
		what += " (" + clean(l.ReportError) + ")"
	}
	if l.RenewTime != nil {
		what = fmt.Sprintf("%s ago: %s", age(now.Sub(*l.RenewTime)), what)
	}
	return what
}

// caRotationLine is a CA rotation's progress, as status and rotate-ca --wait print it.
func caRotationLine(r *api.CARotation) string {
	return fmt.Sprintf("%s: %d of %d members trust the new CA, %d serve its certificate", r.Phase, r.Trusting, r.Members, r.Issued) +
		also("restarting", r.Restarting)
}

// also is the clause "; what who" of a progress line, "" when who is "".
func also(what, who string) string {
	if who == "" {
		return ""
	}
	return "; " + what + " " + who
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}

// clean escapes what a terminal would act on in text the status quotes from inputs (agent errors,
// condition messages, Lease annotations anyone with the member's token can write): control characters
// (escape sequences, carriage returns, newlines and tabs that would forge lines or columns) and Unicode
// format characters (bidirectional overrides), as Go escapes them (\x1b, \n, \u202e).
func clean(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) && r != ' ' }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

// tlsState says whether the cluster runs TLS, from what is reported first (the members' URLs, their
// certificate report), then from the spec.
func (s *Snapshot) tlsState() string {
	if s.status.TLS != nil {
		return "on"
	}
	for _, m := range s.status.Members {
		if strings.HasPrefix(m.ClientURL, "https://") || strings.HasPrefix(m.PeerURL, "https://") {
			return "on"
		}
	}
	if s.tlsSpec != nil && !*s.tlsSpec {
		return "off"
	}
	return "not reported yet"
}

// writeText prints the one-screen status. now is the reference for ages and expiries.
func writeText(w io.Writer, s *Snapshot, now time.Time) error {
	st := &s.status
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	healthy, voters := s.voters()
	fmt.Fprintf(tw, "EtcdCluster:\t%s/%s\n", s.Namespace, s.Name)
	fmt.Fprintf(tw, "Phase:\t%s\n", dash(st.Phase))
	fmt.Fprintf(tw, "Message:\t%s\n", dash(st.Message))
	target := "-"
	if st.Target != nil {
		target = fmt.Sprintf("size %d, version %s", st.Target.Size, st.Target.Version)
	}
	fmt.Fprintf(tw, "Target:\t%s\n", target)
	fmt.Fprintf(tw, "Voters:\t%d of %d healthy; pods %d ready of %d; running version %s; leader %s\n",
		healthy, voters, st.ReadyReplicas, st.Replicas, dash(st.CurrentVersion), dash(st.Leader))
	fmt.Fprintf(tw, "In flight:\t%s\n", s.inFlight())
	gen := fmt.Sprintf("%d (the hook has seen %d)", s.Generation, s.ObservedGeneration)
	if s.ObservedGeneration < s.Generation {
		gen += ": the latest spec change is not reflected yet"
	}
	fmt.Fprintf(tw, "Generation:\t%s\n", gen)
	fmt.Fprintf(tw, "Cluster ID:\t%s\n", dash(st.ClusterID))
	fmt.Fprintf(tw, "TLS:\t%s\n", s.tlsState())
	if t := st.TLS; t != nil {
		fmt.Fprintf(tw, "  CA expires:\t%s\n", expiry(t.CANotAfter, now))
		fmt.Fprintf(tw, "  Certificates expire:\t%s\n", expiry(t.CertNotAfter, now))
		if len(t.CAFingerprints) > 0 {
			fmt.Fprintf(tw, "  Trusted CAs (SHA-256):\t%s\n", strings.Join(t.CAFingerprints, ", "))
		}
		if r := t.Renewal; r != nil {
			fmt.Fprintf(tw, "  Renewal %q:\t%d of %d members serve a renewed certificate (member keys kept)\n", r.Request, r.Renewed, r.Members)
		}
		if r := t.CARotation; r != nil {
			fmt.Fprintf(tw, "  CA rotation %q:\t%s\n", r.Request, caRotationLine(r)+also("waiting for", r.Waiting))
		}
		if sw := t.Switch; sw != nil {
			line := fmt.Sprintf("%s: %d of %d peer URLs on %s", sw.Phase, sw.Switched, sw.Members, sw.To)
			fmt.Fprintf(tw, "  Switching to %s:\t%s\n", sw.To, line+also("moving", sw.Switching)+also("waiting for", sw.Waiting))
		}
	}
	if b := st.Backup; b != nil {
		fmt.Fprintf(tw, "Last backup:\t%s\n", lastBackup(b, now))
		if b.LastFailureTime != nil {
			fmt.Fprintf(tw, "  Last failure:\t%s (%s ago): %s\n", b.LastFailureTime.UTC().Format(time.RFC3339), age(now.Sub(b.LastFailureTime.Time)), dash(b.LastFailure))
		}
		if c := b.Continuous; c != nil && c.Time != nil {
			line := fmt.Sprintf("revision %d at %s (%s ago)", c.Revision, c.Time.UTC().Format(time.RFC3339), age(now.Sub(c.Time.Time)))
			if c.Message != "" {
				line += "; writer: " + c.Message
			}
			fmt.Fprintf(tw, "  Restorable to:\t%s\n", line)
		}
	}
	if v := st.Storage; v != nil {
		fmt.Fprintf(tw, "Storage:\t%s\n", storageLine(v))
	}
	if v := st.Space; v != nil {
		fmt.Fprintf(tw, "Space:\tquota %d bytes (spec %d)%s\n", v.QuotaBytes, v.SpecQuotaBytes, dashPrefix(v.Message))
	}
	if v := st.Auth; v != nil {
		fmt.Fprintf(tw, "Auth:\t%s\n", authLine(v))
	}
	if v := st.Standby; v != nil {
		fmt.Fprintf(tw, "Standby:\t%s\n", standbyLine(v))
	}
	if v := st.Recovery; v != nil {
		fmt.Fprintf(tw, "Recovery:\t%s%s (kubectl etcd recover %s --plan)\n", v.Phase, dashPrefix(v.Message), s.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nConditions:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, dash(c.Reason), dash(c.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nMembers:")
	rows := s.memberRows(now)
	withSize := len(s.dbSizes()) > 0
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "  NAME\tID\tROLE\tHEALTHY\tVERSION\tLEADER"
	if withSize {
		head += "\tDB SIZE"
	}
	fmt.Fprintln(tw, head+"\tAGENT REPORT")
	for _, r := range rows {
		line := fmt.Sprintf("  %s\t%s\t%s\t%s\t%s\t%s", r.name, r.id, r.role, r.healthy, r.version, r.leader)
		if withSize {
			line += "\t" + r.dbSize
		}
		fmt.Fprintln(tw, line+"\t"+r.report)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "  (none reported yet)")
	}
	if s.LeaseError != "" {
		fmt.Fprintf(w, "  (member Leases not read: %s)\n", clean(s.LeaseError))
	}
	return nil
}

// authLine is status.auth in one line: enforced or not, applied or not, each user's expiry or problem.
func authLine(a *api.AuthStatus) string {
	line := "not enforced"
	if a.Enabled {
		line = "enforced"
	}
	if a.Applied != a.Declared {
		line += fmt.Sprintf(", applying %s (etcd holds %s)", a.Declared, dash(a.Applied))
	}
	for _, u := range a.Users {
		switch {
		case u.Problem != "":
			line += fmt.Sprintf("; %s: %s", u.Name, u.Problem)
		case u.NotAfter != "":
			line += fmt.Sprintf("; %s until %s", u.Name, u.NotAfter)
		default:
			line += fmt.Sprintf("; %s: no certificate yet", u.Name)
		}
	}
	return line
}
