package sync

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/etcdhook/etcdhook/api"
	frozen "github.com/etcdhook/etcdhook/internal/fixture"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// world models everything around the hook closely enough to drive it through sequences: Metacontroller
// applying responses (children, status), the StatefulSet controller (pods, claims, partition), etcd's
// member list, the agents' protocol (seed, join, promote, leave, park) and the Jobs. Tests mutate it to
// inject failures; every sync is checked against the invariants of docs/design/09-invariants.md §9.
type world struct {
	t    testing.TB
	now  time.Time
	name string
	ns   string
	uid  string
	opts Options

	generation int64
	spec       api.ClusterSpec
	status     api.ClusterStatus

	// v2 keys children by namespace/name; lastApplied adds Metacontroller's dynamic-apply annotation.
	v2          bool
	lastApplied bool

	desired map[string]map[string]map[string]any // group key -> name -> last desired object
	created map[string]time.Time
	stsGen  int64
	stsSpec string
	stsSeen int64 // the generation the StatefulSet controller has observed
	stsLag  bool  // when set, the StatefulSet controller does not observe new generations
	pods    map[int]*simPod
	// ca: the CA Secret and what each pod's etcd trusts (carotation_test.go).
	ca        simCA
	pvcs      map[int]*simPVC
	leases    map[int]*simLease
	jobs      map[string]*simJob
	etcd      simEtcd
	data      map[int]string // member ID recorded in ordinal i's volume ("" = empty)
	owner     map[int]string // the parent UID ordinal i's volume is bound to
	noPromote map[int]bool   // the learner at ordinal i never catches up
	// revision: what ordinal i's agent reports as its revision while it knows no leader (default 100);
	// recovered: the recovery token whose part it carried out (membership.Agent.recovered).
	revision  map[int]int64
	recovered map[int]string
	// authApplies: the leader's agent applies the ConfigMap's auth.json as soon as it is there, and
	// reports it with each user's certificate expiring at userNotAfter (membership.Agent.reconcileAuth).
	authApplies  bool
	userNotAfter time.Time
	// forceSteps: how many looks a survivor's restart takes (its report has no revision meanwhile);
	// forcing: the ordinal restarting so.
	forceSteps int
	forcing    map[int]bool
	// staticUp: ordinals whose etcd started from a static initial cluster and waits for a quorum of
	// its members (membership.StartStatic) before the cluster exists.
	staticUp map[int]bool
	down     map[int]bool // pod present but its agent and etcd are dead
	// peerSwitches: the ordinals whose peer URL moved to the other scheme, in order (a TLS switch).
	peerSwitches []int
	noJobs       bool // Jobs stay active (their pods cannot run)
	failJobs     bool // Jobs fail
	// The in-place restore's snapshot: damaged, another cluster's (its UID), or changed between its
	// verification and the restore; verified counts the verify Job runs.
	snapshotDamaged, snapshotChanged bool
	snapshotOwner                    string
	verified                         int
	// pointRevision is the revision a verify Job's restore to a time point ends at (what the chain
	// holds at that time); verifyFlags and restoreFlags the last verify and restore Jobs' flags.
	// noAtRevision: the verify Job's report names no revision (an older agent).
	pointRevision             int64
	verifyFlags, restoreFlags map[string]string
	noAtRevision              bool
	// noResizer: a grown claim's capacity stays (no volume driver grows it); stsOrphaned counts the
	// StatefulSets deleted with their pods orphaned.
	noResizer   bool
	stsOrphaned int
	// refuseGrowth: the API server refuses a larger claim (a StorageClass without allowVolumeExpansion).
	refuseGrowth bool
	seq          int
	lastResp     *Response
	badImage     string // pods with this image never start
	// secrets are the Secrets in the namespace (the user's TLS Secrets), related by name when named.
	secrets map[string]map[string][]byte
	// certNotAfter is what simulated agents report as their certificate's expiry (TLS on; zero: 60 days
	// after the fixture clock, as a healthy built-in certificate two thirds in would).
	certNotAfter time.Time
	// readyLag: a pod turns ready one step after its agent first reports a healthy voter, as the
	// kubelet's readiness probe period makes it in a real cluster.
	readyLag bool
	// deleting: the parent carries a deletionTimestamp (finalize requests).
	deleting bool
	// parentAnn are the parent's annotations (etcd.io/backup-now); backupAnn what the backup Jobs
	// wrote on the backup Lease; noCronJobs: a registration from before backups (no CronJob group).
	parentAnn map[string]string
	// applierPods: the standby applier's pods (its StatefulSet's status.replicas).
	applierPods int64
	backupAnn   map[string]string
	noCronJobs  bool
	// noNetworkPolicies: a registration from before the NetworkPolicy child.
	noNetworkPolicies bool
	failBackups       bool
	refuseBackups     bool // the store refuses the backup Jobs' credentials (terminal)
	// restoreFail: the seed cannot restore (its RestoreFailed report); restored: the snapshot the seed
	// restored from (reported with revision 4242).
	restoreFail string
	restored    string
	// dbSize: what every running member reports as its database size (0: unknown), with dbSizeInUse;
	// alarms: the cluster's alarms every running member reports.
	dbSize, dbSizeInUse int64
	alarms              []string
	// Defragmentation as the agents execute it: the pass each ordinal completed (and when), the pass
	// one is executing; slowDefrag makes each defragmentation take one extra step (reported running).
	defragDone    map[int]string
	defragAt      map[int]time.Time
	defragRunning map[int]string
	slowDefrag    bool
	noDefrag      bool // the agents have not acted on a defragmentation request yet
	// specRaw replaces top-level spec fields with JSON the typed spec cannot hold (what the API server
	// may accept through preserve-unknown-fields or int-or-string).
	specRaw map[string]any
}

type simPod struct {
	uid      string
	revision string
	image    string
	// peerScheme: the scheme of the peer URL its template advertises (a joining member's); transition:
	// the template's --tls-transition value ("" none), under which its agent moves its peer URL when asked.
	peerScheme, transition string
	// tls: its template hands etcd certificates (the agent issues them and reports its files).
	tls   bool
	ready bool
	// quota: the backend quota its template's etcd flags give (what its agent reports).
	quota int64
	// readyAt is when ready last changed as the API server shows it (the Ready condition's
	// lastTransitionTime), for readyWas and readyUID (a new pod is a transition).
	readyAt  time.Time
	readyWas bool
	readyUID string
	// createdAt: when the pod with this uid was first observed (its creationTimestamp).
	createdAt time.Time
	// healthy: the agent reported a healthy voter at the last step (readiness follows it under readyLag).
	healthy bool
	// deletingAt: when the pod was asked to go (its deletionTimestamp; zero: not being deleted), set by tests.
	deletingAt time.Time
}

// trackReady records a readiness change (or a new pod) at now, as the kubelet's status update does.
func (p *simPod) trackReady(now time.Time) {
	if p.uid != p.readyUID {
		p.createdAt = now
	}
	if p.readyAt.IsZero() || p.ready != p.readyWas || p.uid != p.readyUID {
		p.readyAt, p.readyWas, p.readyUID = now, p.ready, p.uid
	}
}

type simPVC struct {
	uid        string
	clusterUID string
	deleting   bool
	// size is spec.resources.requests.storage, capacity status.capacity.storage (the volume driver's).
	size, capacity string
}

type simLease struct {
	holder  string
	renewed time.Time
	report  api.Report
}

type simJob struct {
	state    facts.JobState
	finished time.Time
	// refused: failed by its pod failure policy (the command exited with api.RestoreExitRefused).
	refused bool
}

type simEtcd struct {
	clusterID string
	members   []api.Member
	leader    string
	nextID    uint64
}

var fixtureNow = frozen.Now

func newWorld(t testing.TB, size int32) *world { return newWorldAt(t, size, fixtureNow) }

func newWorldAt(t testing.TB, size int32, start time.Time) *world {
	w := &world{
		t: t, now: start, name: "demo", ns: "prod", uid: "8f0c7a52-3b1e-4d6a-9f11-2c5e8d7b6a10",
		opts:       Options{Image: frozen.Image},
		generation: 1,
		desired:    map[string]map[string]map[string]any{},
		created:    map[string]time.Time{},
		pods:       map[int]*simPod{}, pvcs: map[int]*simPVC{}, leases: map[int]*simLease{},
		jobs: map[string]*simJob{}, data: map[int]string{}, down: map[int]bool{},
		owner: map[int]string{}, noPromote: map[int]bool{}, staticUp: map[int]bool{},
		revision: map[int]int64{}, recovered: map[int]string{}, forcing: map[int]bool{},
		etcd: simEtcd{nextID: 0x8e9e05c52164694d},
	}
	w.spec.Size = ptr(size)
	return w
}

// names: the agents' view, which follows the spec's TLS setting (the default: on).
func (w *world) names() api.Names {
	return api.Names{Cluster: w.name, Namespace: w.ns, TLS: api.Defaulted(w.spec).Security.TLS.TLSOn()}
}

func (w *world) newUID(kind string) string {
	w.seq++
	return fmt.Sprintf("%s-%04d", kind, w.seq)
}

// setSpec is a user edit: a new generation.
func (w *world) setSpec(edit func(*api.ClusterSpec)) {
	edit(&w.spec)
	w.generation++
}

// ---- the request Metacontroller would send --------------------------------------------------------

var childKeys = []string{wire.KeyStatefulSet, wire.KeyService, wire.KeyPDB, wire.KeyConfigMap, wire.KeyLease, wire.KeyJob, wire.KeyServiceAccount, wire.KeyRole, wire.KeyRoleBinding, wire.KeyCronJob, wire.KeyNetworkPolicy}

func (w *world) key(name string) string {
	if w.v2 {
		return w.ns + "/" + name
	}
	return name
}

func (w *world) parentJSON() map[string]any {
	st, _ := json.Marshal(w.status)
	sp, _ := json.Marshal(w.spec)
	var stm, spm map[string]any
	_ = json.Unmarshal(st, &stm)
	_ = json.Unmarshal(sp, &spm)
	for k, v := range w.specRaw {
		spm[k] = v
	}
	md := map[string]any{
		"name": w.name, "namespace": w.ns, "uid": w.uid, "generation": w.generation,
		"creationTimestamp": fixtureNow.Add(-24 * time.Hour).Format(time.RFC3339),
	}
	if w.deleting {
		md["deletionTimestamp"] = w.now.UTC().Format(time.RFC3339)
	}
	if len(w.parentAnn) > 0 {
		md["annotations"] = w.parentAnn
	}
	return map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": md,
		"spec":     spm,
		"status":   stm,
	}
}

func (w *world) request() *Request {
	req := &Request{Children: map[string]map[string]jsontext.Value{}, Related: map[string]map[string]jsontext.Value{}}
	req.Parent = mustJSON(w.parentJSON())
	for _, k := range childKeys {
		if k == wire.KeyCronJob && w.noCronJobs || k == wire.KeyNetworkPolicy && w.noNetworkPolicies {
			continue
		}
		group := map[string]jsontext.Value{}
		for name, obj := range w.desired[k] {
			group[w.key(name)] = mustJSON(w.observe(k, name, obj))
		}
		req.Children[k] = group
	}
	pods := map[string]jsontext.Value{}
	for i, p := range w.pods {
		pods[w.key(w.names().Pod(i))] = mustJSON(w.podJSON(i, p))
	}
	req.Related[wire.KeyPod] = pods
	pvcs := map[string]jsontext.Value{}
	for i, c := range w.pvcs {
		pvcs[w.key(w.names().PVC(i))] = mustJSON(w.pvcJSON(i, c))
	}
	req.Related[wire.KeyPVC] = pvcs
	// As Metacontroller relates them after the customize hook: the named Secrets that exist.
	if names := tlsSecretNames(&api.EtcdCluster{Spec: w.spec}); len(names) > 0 {
		secrets := map[string]jsontext.Value{}
		for _, n := range names {
			if data, ok := w.secrets[n]; ok {
				secrets[w.key(n)] = mustJSON(map[string]any{
					"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
					"metadata": map[string]any{"name": n, "namespace": w.ns},
					"data":     data,
				})
			}
		}
		req.Related[wire.KeySecret] = secrets
	}
	return req
}

func mustJSON(v any) jsontext.Value {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func deepCopyMap(m map[string]any) map[string]any {
	var out map[string]any
	_ = json.Unmarshal(mustJSON(m), &out)
	return out
}

func (w *world) ownerRef() []any {
	return []any{map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind, "name": w.name, "uid": w.uid,
		"controller": true, "blockOwnerDeletion": true,
	}}
}

// observe adds what the API server and the other actors add to a desired child.
func (w *world) observe(key, name string, desired map[string]any) map[string]any {
	o := deepCopyMap(desired)
	md := o["metadata"].(map[string]any)
	md["uid"] = "uid-" + strings.ToLower(strings.Split(key, ".")[0]) + "-" + name
	md["creationTimestamp"] = w.created[key+"/"+name].UTC().Format(time.RFC3339)
	md["ownerReferences"] = w.ownerRef()
	md["labels"].(map[string]any)["controller-uid"] = w.uid
	if w.lastApplied {
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			md["annotations"] = ann
		}
		ann[lastAppliedAnnotation] = string(mustJSON(desired))
	}
	switch key {
	case wire.KeyStatefulSet:
		md["generation"] = w.stsGen
		o["status"] = w.stsStatus()
		if name == w.names().StandbyApplier() {
			// The applier's pod, as the controllers step left it.
			md["generation"] = int64(1)
			o["status"] = map[string]any{"observedGeneration": int64(1), "replicas": w.applierPods}
		}
	case wire.KeyLease:
		if name == w.names().BackupName() && len(w.backupAnn) > 0 {
			ann := map[string]any{}
			for k, v := range w.backupAnn {
				ann[k] = v
			}
			md["annotations"] = ann
		}
		i := w.names().LeaseOrdinal(name)
		if l := w.leases[i]; l != nil {
			ann, _ := md["annotations"].(map[string]any)
			for k, v := range l.report.Annotations() {
				ann[k] = v
			}
			o["spec"] = map[string]any{
				"holderIdentity":       l.holder,
				"leaseDurationSeconds": api.DefaultLeaseDurationSeconds,
				"renewTime":            l.renewed.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
			}
		}
	case wire.KeyJob:
		if j := w.jobs[name]; j != nil {
			o["status"] = jobStatusJSON(j)
		}
	}
	return o
}

func jobStatusJSON(j *simJob) map[string]any {
	switch j.state {
	case facts.JobSucceeded:
		t := j.finished.UTC().Format(time.RFC3339)
		return map[string]any{"succeeded": 1, "completionTime": t, "conditions": []any{
			map[string]any{"type": "Complete", "status": "True", "lastTransitionTime": t},
		}}
	case facts.JobFailed:
		t := j.finished.UTC().Format(time.RFC3339)
		reason := "BackoffLimitExceeded"
		if j.refused {
			reason = "PodFailurePolicy"
		}
		return map[string]any{"failed": 1, "conditions": []any{
			map[string]any{"type": "Failed", "status": "True", "lastTransitionTime": t, "reason": reason},
		}}
	}
	return map[string]any{"active": 1}
}

func (w *world) sts() map[string]any { return w.desired[wire.KeyStatefulSet][w.name] }

func (w *world) stsInt(path ...string) int {
	var v any = w.sts()
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	f, _ := v.(float64)
	return int(f)
}

func (w *world) replicas() int { return w.stsInt("spec", "replicas") }
func (w *world) partition() int {
	return w.stsInt("spec", "updateStrategy", "rollingUpdate", "partition")
}

func (w *world) updateRevision() string {
	if w.sts() == nil {
		return ""
	}
	ann := w.sts()["metadata"].(map[string]any)["annotations"].(map[string]any)
	return "demo-" + ann[api.AnnTemplateHash].(string)[:10]
}

// templateSize is the storage the StatefulSet's claim template asks for.
func (w *world) templateSize() string {
	if w.sts() == nil {
		return ""
	}
	vct := w.sts()["spec"].(map[string]any)["volumeClaimTemplates"].([]any)[0].(map[string]any)
	return vct["spec"].(map[string]any)["resources"].(map[string]any)["requests"].(map[string]any)["storage"].(string)
}

// stsSchemes reads the template's advertised peer scheme, its --tls-transition value and whether it
// has certificates.
func (w *world) stsSchemes() (peer, transition string, tls bool) {
	c := w.sts()["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	for _, a := range c.(map[string]any)["command"].([]any) {
		s := a.(string)
		if v, ok := strings.CutPrefix(s, api.AgentFlagTLSTransition); ok {
			transition = v
		}
		if v, ok := strings.CutPrefix(s, "--initial-advertise-peer-urls="); ok {
			peer, _, _ = strings.Cut(v, "://")
		}
		tls = tls || strings.HasPrefix(s, "--cert-file=")
	}
	return peer, transition, tls
}

func (w *world) stsImage() string {
	c := w.sts()["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	return c.(map[string]any)["image"].(string)
}

// stsQuota is the backend quota the StatefulSet's etcd flags give (etcd's default without the flag).
func (w *world) stsQuota() int64 {
	c := w.sts()["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	options := map[string]string{}
	for _, arg := range c.(map[string]any)["command"].([]any) {
		if v, ok := strings.CutPrefix(arg.(string), "--quota-backend-bytes="); ok {
			options["quota-backend-bytes"] = v
		}
	}
	q, _ := api.QuotaBackendBytes(options)
	return q
}

func (w *world) stsStatus() map[string]any {
	ready, updated := 0, 0
	cur := w.updateRevision()
	for _, i := range sortedKeys(w.pods) {
		p := w.pods[i]
		if p.ready {
			ready++
		}
		if p.revision == w.updateRevision() {
			updated++
		} else {
			cur = p.revision
		}
	}
	return map[string]any{
		"observedGeneration": w.stsSeen, "replicas": len(w.pods), "readyReplicas": ready,
		"currentReplicas": len(w.pods) - updated, "updatedReplicas": updated,
		"currentRevision": cur, "updateRevision": w.updateRevision(),
	}
}

func (w *world) podJSON(i int, p *simPod) map[string]any {
	ready := "False"
	if p.ready {
		ready = "True"
	}
	p.trackReady(w.now) // changes made outside agents() (tests) count from when they are observed
	labels := map[string]any{}
	for k, v := range w.names().Labels() {
		labels[k] = v
	}
	labels["controller-revision-hash"] = p.revision
	labels["statefulset.kubernetes.io/pod-name"] = w.names().Pod(i)
	md := map[string]any{
		"name": w.names().Pod(i), "namespace": w.ns, "uid": p.uid, "labels": labels,
		"creationTimestamp": p.createdAt.UTC().Format(time.RFC3339),
		"ownerReferences":   []any{map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": w.name, "uid": "uid-statefulset-" + w.name, "controller": true}},
	}
	if !p.deletingAt.IsZero() {
		md["deletionTimestamp"] = p.deletingAt.UTC().Format(time.RFC3339)
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": md,
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "etcd", "image": p.image}}},
		"status": map[string]any{"phase": "Running", "conditions": []any{
			map[string]any{"type": "Ready", "status": ready, "lastTransitionTime": p.readyAt.UTC().Format(time.RFC3339)},
		}},
	}
}

func (w *world) pvcJSON(i int, c *simPVC) map[string]any {
	labels := map[string]any{}
	for k, v := range w.names().Labels() {
		labels[k] = v
	}
	labels[api.LabelClusterUID] = c.clusterUID
	md := map[string]any{"name": w.names().PVC(i), "namespace": w.ns, "uid": c.uid, "labels": labels}
	size, capacity := c.size, c.capacity
	if size == "" {
		size, capacity = "10Gi", "10Gi"
	}
	if c.deleting {
		md["deletionTimestamp"] = w.now.UTC().Format(time.RFC3339)
		md["finalizers"] = []any{"kubernetes.io/pvc-protection"}
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md,
		"spec":   map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": size}}},
		"status": map[string]any{"phase": "Bound", "capacity": map[string]any{"storage": capacity}},
	}
}

// ---- Metacontroller: call the hook and apply the answer ---------------------------------------------

func (w *world) sync() *Response {
	w.t.Helper()
	req := w.request()
	resp, err := Compute(req, w.now, w.opts)
	if err != nil {
		w.t.Fatalf("sync: %v", err)
	}
	if debugHook != nil {
		debugHook(w, resp)
	}
	w.checkResponse(req, resp)
	w.apply(resp)
	return resp
}

var debugHook func(*world, *Response)

func (w *world) apply(resp *Response) {
	next := map[string]map[string]map[string]any{}
	for _, c := range resp.Children {
		obj := c.(map[string]any)
		key := groupKey(obj)
		name := obj["metadata"].(map[string]any)["name"].(string)
		if next[key] == nil {
			next[key] = map[string]map[string]any{}
		}
		next[key][name] = deepCopyMap(obj)
		if _, ok := w.created[key+"/"+name]; !ok || w.desired[key][name] == nil {
			w.created[key+"/"+name] = w.now
		}
		if key == wire.KeyJob && w.jobs[name] == nil {
			w.jobs[name] = &simJob{state: facts.JobActive}
		}
	}
	for name := range w.jobs {
		if next[wire.KeyJob][name] == nil {
			delete(w.jobs, name)
		}
	}
	for i := range w.leases {
		if next[wire.KeyLease][w.names().Lease(i)] == nil {
			delete(w.leases, i)
		}
	}
	if before, after := w.sts(), next[wire.KeyStatefulSet][w.name]; before != nil && after != nil {
		b, a := before["spec"].(map[string]any)["volumeClaimTemplates"], after["spec"].(map[string]any)["volumeClaimTemplates"]
		if string(mustJSON(b)) != string(mustJSON(a)) {
			w.t.Errorf("the answer changes the StatefulSet's volumeClaimTemplates, which the API server refuses:\n%s\n%s", mustJSON(b), mustJSON(a))
		}
	}
	w.desired = next
	if s := w.sts(); s != nil {
		spec := string(mustJSON(s["spec"]))
		if spec != w.stsSpec {
			w.stsSpec = spec
			w.stsGen++
		}
	}
	w.status = *resp.Status
	w.lastResp = resp
}

func groupKey(obj map[string]any) string {
	av, kind := obj["apiVersion"].(string), obj["kind"].(string)
	return kind + "." + av
}

// ---- the StatefulSet controller ---------------------------------------------------------------------

func (w *world) controllers() {
	// A standby's applier: its pod follows spec.replicas (gone with its StatefulSet).
	w.applierPods = 0
	if a := w.desired[wire.KeyStatefulSet][w.names().StandbyApplier()]; a != nil {
		r, _ := dig(a, "spec", "replicas").(float64)
		w.applierPods = int64(r)
	}
	if w.sts() == nil || w.stsLag {
		return
	}
	w.stsSeen = w.stsGen
	r, part := w.replicas(), w.partition()
	for i := range w.pods {
		if i >= r {
			delete(w.pods, i)
			delete(w.down, i)
		}
	}
	emptyDir := w.desired[wire.KeyStatefulSet][w.name]["spec"].(map[string]any)["volumeClaimTemplates"] == nil
	for i := 0; i < r; i++ {
		if w.pods[i] != nil {
			continue
		}
		rev := w.updateRevision()
		if i < part {
			rev = w.currentRevisionFor(i)
		}
		w.pods[i] = &simPod{uid: w.newUID("pod"), revision: rev, image: w.stsImage(), quota: w.stsQuota()}
		w.pods[i].peerScheme, w.pods[i].transition, w.pods[i].tls = w.stsSchemes()
		if emptyDir {
			w.data[i] = ""
		} else if w.pvcs[i] == nil {
			size := w.templateSize()
			w.pvcs[i] = &simPVC{uid: w.newUID("pvc"), clusterUID: w.uid, size: size, capacity: size}
			w.data[i] = ""
		}
	}
	// Rolling update: replace the highest pod at or above the partition not on the update revision,
	// only while every pod above it is ready (the controller's own health gate).
	for i := r - 1; i >= part; i-- {
		p := w.pods[i]
		if p.revision != w.updateRevision() {
			w.pods[i] = &simPod{uid: w.newUID("pod"), revision: w.updateRevision(), image: w.stsImage(), quota: w.stsQuota()}
			w.pods[i].peerScheme, w.pods[i].transition, w.pods[i].tls = w.stsSchemes()
			if emptyDir {
				w.data[i] = ""
			}
			break
		}
		if !p.ready {
			break
		}
	}
}

// currentRevisionFor: a pod below the partition is recreated at the revision its peers run.
func (w *world) currentRevisionFor(i int) string {
	for _, j := range sortedKeys(w.pods) {
		if p := w.pods[j]; j != i && p.revision != w.updateRevision() {
			return p.revision
		}
	}
	return w.updateRevision()
}

// ---- etcd and the agents ----------------------------------------------------------------------------

func (w *world) peerURL(i int) string { return w.names().PeerURL(i) }

// byPeer finds the member at url, whichever its scheme (a TLS switch moves it).
func (e *simEtcd) byPeer(url string) *api.Member {
	_, host, _ := strings.Cut(url, "://")
	for k := range e.members {
		if _, h, _ := strings.Cut(e.members[k].PeerURL, "://"); h == host {
			return &e.members[k]
		}
	}
	return nil
}

func (e *simEtcd) byID(id string) *api.Member {
	for k := range e.members {
		if e.members[k].ID == id {
			return &e.members[k]
		}
	}
	return nil
}

func (e *simEtcd) add(url string, learner bool) string {
	e.nextID += 0x1111
	id := api.FormatID(e.nextID)
	e.members = append(e.members, api.Member{ID: id, PeerURL: url, Learner: learner})
	sort.Slice(e.members, func(a, b int) bool { return e.members[a].ID < e.members[b].ID })
	return id
}

func (e *simEtcd) remove(id string) {
	for k := range e.members {
		if e.members[k].ID == id {
			e.members = append(e.members[:k], e.members[k+1:]...)
			break
		}
	}
	if e.leader == id {
		e.leader = ""
	}
}

// alive says whether ordinal i runs etcd: a pod that is not down, not broken.
func (w *world) alive(i int) bool {
	p := w.pods[i]
	return p != nil && !w.down[i] && p.image != w.badImage
}

func (w *world) ordinalOf(m api.Member) int { return w.names().PeerURLOrdinal(m.PeerURL) }

// votersWhere counts the voters (learners left out) and, of them, those at an ordinal for which ok holds.
func (w *world) votersWhere(ok func(i int, m api.Member) bool) (voters, n int) {
	for _, m := range w.etcd.members {
		if m.Learner {
			continue
		}
		voters++
		if i := w.ordinalOf(m); i >= 0 && ok(i, m) {
			n++
		}
	}
	return voters, n
}

// healthyAt: member m, at ordinal i, has started and runs on its own data in a pod that is alive.
func (w *world) healthyAt(i int, m api.Member) bool {
	return w.alive(i) && m.Started && w.data[i] == m.ID
}

// quorum: the started voters whose pods are alive are a majority of the voters.
func (w *world) quorum() bool {
	voters, up := w.votersWhere(w.healthyAt)
	return voters > 0 && up >= api.Quorum(voters)
}

// canRemove applies the quorum rule the agent and the remove Job check before removing a member:
// healthy voters are a quorum of the current and of the resulting voters.
func (w *world) canRemove(id string) bool {
	all, healthy, self := 0, 0, false
	for _, m := range w.etcd.members {
		if m.Learner {
			if m.ID == id {
				return true
			}
			continue
		}
		all++
		if i := w.ordinalOf(m); i >= 0 && w.healthyAt(i, m) {
			healthy++
			self = self || m.ID == id
		}
	}
	after := healthy
	if self {
		after--
	}
	return all > 1 && healthy >= api.Quorum(all) && after >= api.Quorum(all-1)
}

func (w *world) leaseIntent(i int) map[string]any {
	l := w.desired[wire.KeyLease][w.names().Lease(i)]
	if l == nil {
		return nil
	}
	ann, _ := l["metadata"].(map[string]any)["annotations"].(map[string]any)
	return ann
}

// agents runs every live agent once: the start-up decision, promote, leave, then its report.
func (w *world) agents() {
	for _, i := range sortedKeys(w.pods) {
		if !w.alive(i) {
			w.pods[i].ready = false
			continue
		}
		w.agent(i)
	}
	for _, p := range w.pods {
		p.trackReady(w.now)
	}
	if w.etcd.leader == "" || w.etcd.byID(w.etcd.leader) == nil {
		for _, m := range w.etcd.members {
			if i := w.ordinalOf(m); !m.Learner && i >= 0 && w.alive(i) && m.Started {
				w.etcd.leader = m.ID
				break
			}
		}
	}
	q := w.quorum()
	for _, i := range sortedKeys(w.pods) {
		// An agent writes its report into its Lease, which only the hook creates; one stopping etcd for a
		// forced restart renews nothing until it is done (membership.Agent.stopEtcd blocks).
		if w.alive(i) && !w.forcing[i] && w.desired[wire.KeyLease][w.names().Lease(i)] != nil {
			w.report(i, q)
		}
	}
}

func (w *world) agent(i int) {
	ann := w.leaseIntent(i)
	if ann == nil {
		return // waits for its Lease
	}
	url := w.peerURL(i)
	if s := w.pods[i].peerScheme; s != "" {
		_, host, _ := strings.Cut(url, "://")
		url = s + "://" + host // a joining member advertises its template's scheme
	}
	m := w.etcd.byPeer(url)
	if ann[api.AnnIntent] == api.IntentLeave {
		if m != nil && m.ID == w.data[i] && w.canRemove(m.ID) {
			w.etcd.remove(m.ID) // moves leadership away and removes itself
		}
		return
	}
	if w.data[i] != "" && w.owner[i] != w.uid {
		if !w.spec.AdoptExistingData {
			return // ForeignData: refuses to start
		}
		w.owner[i] = w.uid // adopted: the data is bound to this cluster from now on
	}
	if w.recover(i, ann) {
		return
	}
	if w.etcd.clusterID == "" {
		w.startStatic(i, ann)
		// A seed mark beside agent.json's record of a static creation is ignored (a hand edit).
		if i == 0 && ann[api.AnnBootstrap] == api.BootstrapSeed && w.agentBootstrap() == "" && w.data[0] == "" && w.restoreFail == "" {
			w.owner[0] = w.uid
			w.etcd.clusterID = "cdf818194e3a8c32"
			id := w.etcd.add(url, false)
			w.etcd.byID(id).Started = true
			w.etcd.byID(id).Name = w.names().Pod(0)
			w.data[0] = id
			w.etcd.leader = id
		}
		return
	}
	if w.data[i] != "" && (m == nil || m.ID != w.data[i]) {
		w.data[i] = "" // proven removed: moved aside
	}
	if to, _ := ann[api.AnnPeerScheme].(string); to != "" && w.data[i] != "" && w.pods[i].transition != "" && w.quorum() {
		// membership.Agent.movePeerURL: member update through its own etcd, then etcd restarted.
		if from, host, _ := strings.Cut(m.PeerURL, "://"); from != to {
			m.PeerURL = to + "://" + host
			w.peerSwitches = append(w.peerSwitches, i)
		}
	}
	if w.data[i] != "" {
		m.Started, m.Name = true, w.names().Pod(i)
		if m.Learner && w.quorum() && !w.noPromote[i] {
			m.Learner = false // promoted once caught up
		}
		return
	}
	if m != nil && !m.Learner && !m.Started && w.quorum() {
		// membership.StartListed: the voter a static initial cluster listed starts on the list.
		w.data[i], w.owner[i] = m.ID, w.uid
		m.Started = true
		return
	}
	if ann[api.AnnJoinPermitted] == nil || !w.quorum() {
		return
	}
	if deadline, _ := time.Parse(time.RFC3339, ann[api.AnnJoinDeadline].(string)); !w.now.Before(deadline) {
		return // an expired permission is no permission
	}
	if m != nil {
		if m.Started || m.Name != "" {
			w.etcd.remove(m.ID) // its data is gone: the old ID goes first
		} else {
			w.data[i], w.owner[i] = m.ID, w.uid // a learner added but never started is reused
			m.Started, m.Name = true, w.names().Pod(i)
			return
		}
	}
	if w.learnerCount() > 0 {
		return // ErrTooManyLearners: retried
	}
	id := w.etcd.add(url, true)
	w.data[i], w.owner[i] = id, w.uid
	nm := w.etcd.byID(id)
	nm.Started, nm.Name = true, w.names().Pod(i)
}

// recover is the agent's part in a recovery (membership.StartFacts.recovery): on data of the member the
// intent names, once per token, a fence sets the data aside and a survivor restarts it as a one-member
// cluster (etcd's --force-new-cluster keeps the cluster and member IDs).
func (w *world) recover(i int, ann map[string]any) bool {
	v, _ := ann[api.AnnRecover].(string)
	rc, err := api.ParseRecoverIntent(v)
	if err != nil || rc.Token == "" || w.data[i] != rc.MemberID || w.recovered[i] == rc.Token {
		return false
	}
	if rc.Role == api.RecoverSurvivor && w.forceSteps > 0 {
		w.forceSteps--
		w.forcing[i] = true // etcd stopped, starting again with --force-new-cluster
		return true
	}
	delete(w.forcing, i)
	w.recovered[i] = rc.Token
	switch rc.Role {
	case api.RecoverFence:
		w.data[i] = ""
	case api.RecoverSurvivor:
		m := *w.etcd.byID(rc.MemberID)
		w.etcd.members, w.etcd.leader = []api.Member{m}, m.ID
	}
	return true
}

// startStatic is membership.StartStatic: with the Lease's static/N mark, agent.json's record of the
// same and no data, ordinal i's etcd starts and waits for its peers; once a quorum of the N runs, the
// cluster exists with all N members listed (those not up yet unstarted, named by the initial cluster).
func (w *world) startStatic(i int, ann map[string]any) {
	v, _ := ann[api.AnnBootstrap].(string)
	n, ok, err := api.ParseStaticBootstrap(v)
	if !ok || err != nil || i >= n || w.agentBootstrap() != v || (w.data[i] != "" && !w.staticUp[i]) {
		return
	}
	w.owner[i] = w.uid
	w.staticUp[i] = true
	up := 0
	for j := 0; j < n; j++ {
		if w.staticUp[j] && w.alive(j) {
			up++
		}
	}
	if up < n/2+1 {
		return
	}
	w.etcd.clusterID = "cdf818194e3a8c32" // the seed's too: the fixtures name it
	for j := 0; j < n; j++ {
		id := w.etcd.add(w.peerURL(j), false)
		m := w.etcd.byID(id)
		m.Name = w.names().Pod(j)
		if w.staticUp[j] && w.alive(j) {
			m.Started, w.data[j] = true, id
			if w.etcd.leader == "" {
				w.etcd.leader = id
			}
		}
	}
}

// agentBootstrap is agent.json's bootstrap as the pods mount it.
func (w *world) agentBootstrap() string {
	cm := w.desired[wire.KeyConfigMap][w.names().ConfigMap()]
	if cm == nil {
		return ""
	}
	raw, _ := cm["data"].(map[string]any)[api.ConfigKeyAgent].(string)
	var a api.AgentConfig
	if json.Unmarshal([]byte(raw), &a) != nil {
		return ""
	}
	return a.Bootstrap
}

// defragment is the agent's part of a defragmentation (membership.Agent.defragment): on a pass token
// it has not completed, it defragments (its file shrinks to what is in use) and reports the token. The
// NOSPACE recovery (membership.Agent.recoverNoSpace) instead runs whenever the member's own alarm is
// raised or its file is at the quota: it defragments a file at the quota, then disarms its own alarm
// if its file has room.
func (w *world) defragment(i int, ann map[string]any, r *api.Report) {
	if w.defragDone == nil {
		w.defragDone, w.defragAt, w.defragRunning = map[int]string{}, map[int]time.Time{}, map[int]string{}
	}
	if _, ok := w.defragAt[i]; ok {
		r.DBSize = r.DBSizeInUse
	}
	ownAlarm := slices.Contains(w.alarms, api.AlarmNoSpace+"@"+r.MemberID)
	quota := w.pods[i].quota
	tok, _ := ann[api.AnnDefrag].(string)
	due := tok != "" && w.defragDone[i] != tok
	if pct, ok := api.ParseSpacePass(tok); ok {
		// The space pass (membership.Agent.spaceDefrag): whenever asked and the file calls for it.
		due = api.SpaceWantsDefrag(r.DBSize, r.DBSizeInUse, quota, pct)
	}
	if tok == api.NoSpacePass {
		due = ownAlarm || api.OverQuota(r.DBSize, quota)
		if !due && !w.down[i] && !w.noDefrag {
			// The turn asked last: the alarms of members no longer in the list are disarmed.
			w.alarms = slices.DeleteFunc(slices.Clone(w.alarms), func(a string) bool {
				_, id, _ := strings.Cut(a, "@")
				return w.etcd.byID(id) == nil
			})
		}
	}
	if running := w.defragRunning[i]; running != "" && !w.down[i] && !w.noDefrag {
		// The agent executes a pass to its end without looking at the Lease again.
		tok, due = running, true
	}
	if due && !w.down[i] && !w.noDefrag {
		if w.slowDefrag && w.defragRunning[i] != tok {
			w.defragRunning[i] = tok
		} else {
			delete(w.defragRunning, i)
			w.defragDone[i] = tok
			if tok != api.NoSpacePass || api.OverQuota(r.DBSize, quota) {
				w.defragAt[i] = w.now
				r.DBSize = r.DBSizeInUse
			}
			if tok == api.NoSpacePass && !api.OverQuota(r.DBSize, quota) {
				w.alarms = slices.DeleteFunc(slices.Clone(w.alarms), func(a string) bool { return a == api.AlarmNoSpace+"@"+r.MemberID })
			}
		}
	}
	r.Defragging, r.DefragDone = w.defragRunning[i], w.defragDone[i]
	if at, ok := w.defragAt[i]; ok {
		r.LastDefrag = at.UTC().Format(time.RFC3339)
	}
}

// loseVolumes wipes the volumes of the ordinals and restarts their pods on them (a lost disk, a claim
// re-created): the agents then run without data.
func (w *world) loseVolumes(ordinals ...int) {
	for _, i := range ordinals {
		old := w.pods[i]
		w.data[i] = ""
		w.pods[i] = &simPod{uid: w.newUID("pod"), revision: old.revision, image: old.image, quota: old.quota,
			peerScheme: old.peerScheme, transition: old.transition, tls: old.tls} // the same template
	}
}

func (w *world) learnerCount() int {
	n := 0
	for _, m := range w.etcd.members {
		if m.Learner {
			n++
		}
	}
	return n
}

func (w *world) report(i int, quorum bool) {
	p := w.pods[i]
	r := api.Report{ClusterUID: w.uid, ClusterID: w.etcd.clusterID, Version: strings.TrimPrefix(p.image[strings.LastIndex(p.image, ":")+1:], "v"), Role: api.RoleNone}
	m := w.etcd.byPeer(w.peerURL(i))
	ann := w.leaseIntent(i)
	switch {
	case w.data[i] != "" && w.owner[i] != w.uid:
		r.Error = api.ReasonForeignData + ": the data directory belongs to another EtcdCluster"
		r.ClusterID = ""
	case m != nil && m.ID == w.data[i]:
		r.MemberID = m.ID
		r.Role = api.RoleVoter
		if m.Learner {
			r.Role = api.RoleLearner
		} else if m.ID == w.etcd.leader {
			r.Role = api.RoleLeader
			r.Auth = w.leaderAuthReport()
		}
		r.Healthy = quorum
		r.LeaderID = w.etcd.leader
		if !quorum {
			// membership.leaderless: the revision and raft term while no leader is known.
			r.Revision, r.RaftTerm = 100, 3
			if rev, ok := w.revision[i]; ok {
				r.Revision = rev
			}
			if w.forcing[i] {
				r.Revision, r.RaftTerm = 0, 0
			}
		}
		if quorum && !m.Learner {
			r.Members = append([]api.Member{}, w.etcd.members...)
		}
	case ann != nil && ann[api.AnnIntent] == api.IntentLeave:
		r.Role = api.RoleLeft
		r.Error = api.ReasonParked + ": removed from the cluster, parked"
	case w.etcd.clusterID != "":
		r.Error = api.ReasonWaitingForJoin + ": no data, waiting for join-permitted"
	default:
		r.ClusterID = ""
	}
	if w.etcd.clusterID == "" {
		r.Version = ""
	}
	if i == 0 && w.restoreFail != "" && w.etcd.clusterID == "" {
		r.Error = w.restoreFail
	}
	if i == 0 && w.restored != "" && r.MemberID != "" {
		r.RestoredFrom, r.RestoredRevision = w.restored, "4242"
	}
	r.Recovered = w.recovered[i]
	if r.MemberID != "" && r.Role != api.RoleLeft {
		r.DBSize, r.DBSizeInUse, r.Alarms = w.dbSize, w.dbSizeInUse, w.alarms
		r.QuotaBytes = p.quota
		w.defragment(i, ann, &r)
	}
	if p.tls {
		// What an agent reports of its files (fixed values: the fixtures compare exactly).
		notAfter := w.certNotAfter
		if notAfter.IsZero() {
			notAfter = fixtureNow.Add(60 * 24 * time.Hour)
		}
		w.caAgent(i, ann, &r)
		r.TLSCertNotAfter = notAfter.UTC().Format(time.RFC3339)
		// A renewal asked on the Lease is served at the agent's next look (here: at once).
		if mark, _ := ann[api.AnnRenewal].(string); mark != "" {
			r.TLSRenewal = mark
		}
	}
	healthy := r.IsVoter() && r.Healthy
	p.ready = healthy && (!w.readyLag || p.healthy)
	p.healthy = healthy
	// The agent renews on its own timer and writes the API server's time: a renewTime from the future
	// (a hand edit) is overwritten at its next renewal.
	if l := w.leases[i]; l != nil && l.holder == p.uid && fmt.Sprint(l.report) == fmt.Sprint(r) && w.now.Sub(l.renewed) < api.RenewInterval(r, api.DefaultLeaseDurationSeconds*time.Second) && !l.renewed.After(w.now) {
		return
	}
	w.leases[i] = &simLease{holder: p.uid, renewed: w.now, report: r}
}

// runJobs executes active Jobs the way `etcdhook member remove` and `pvc delete` do.
func (w *world) runJobs() {
	for _, name := range sortedKeys(w.jobs) {
		j := w.jobs[name]
		if j.state != facts.JobActive || w.noJobs {
			continue
		}
		if w.failJobs {
			j.state, j.finished = facts.JobFailed, w.now
			continue
		}
		obj := w.desired[wire.KeyJob][name]
		args := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["command"].([]any)
		flags := map[string]string{}
		for _, a := range args {
			if k, v, ok := strings.Cut(strings.TrimPrefix(a.(string), "--"), "="); ok {
				flags[k] = v
			}
		}
		switch {
		case flags["id"] != "":
			m := w.etcd.byID(flags["id"])
			if m != nil && !w.canRemove(m.ID) {
				j.state, j.finished = facts.JobFailed, w.now
				continue
			}
			if m != nil {
				w.etcd.remove(m.ID)
			}
		case flags["destination"] != "":
			// The backup Job: a snapshot at the current revision, reported on the backup Lease.
			if w.backupAnn == nil {
				w.backupAnn = map[string]string{}
			}
			at := w.now.UTC()
			if w.failBackups {
				w.backupAnn[api.AnnBackupFailure] = api.BackupReport{Time: at, Message: "s3://etcd-backups/prod is not reachable or refused the credentials: AccessDenied", Token: flags["token"]}.String()
				j.state, j.finished = facts.JobFailed, w.now
				continue
			}
			if w.refuseBackups {
				// The store answered no: etcdhook backup exits 3 and the Job fails without retrying.
				w.backupAnn[api.AnnBackupFailure] = api.BackupReport{Time: at, Message: "s3://etcd-backups/prod refused the credentials: credentials refused: AccessDenied", Token: flags["token"], Terminal: true}.String()
				j.state, j.finished, j.refused = facts.JobFailed, w.now, true
				continue
			}
			w.backupAnn[api.AnnBackupSuccess] = api.BackupReport{Time: at, Revision: 4242, Size: 2 << 20, Token: flags["token"],
				Snapshot: strings.TrimSuffix(flags["destination"], "/") + "/prod/demo/" + at.Format("20060102T150405Z") + "-r4242.db"}.String()
		case flags["from"] != "" && slices.Contains(args, any("--verify-only")):
			// The verify Job (etcdhook restore --verify-only): it touches nothing and reports on the
			// backup Lease; a damaged snapshot, or another cluster's not accepted, is refused.
			// (A "latest" resolves to the destination's newest snapshot of the cluster.)
			snapshot := strings.Replace(flags["from"], "/latest", "/prod/demo/20260101T000000Z-r4242.db", 1)
			r := api.RestoreReport{Time: w.now.UTC(), Job: name, Outcome: api.RestoreVerified, Snapshot: snapshot, SHA256: strings.Repeat("ab", 32), Revision: 4242, Size: 2 << 20}
			// Where the keyspace would end: the snapshot's revision, the revision asked, or the
			// chain's newest at a time.
			r.AtRevision = 4242
			if rev := flags["to-revision"]; rev != "" {
				r.AtRevision, _ = strconv.ParseInt(rev, 10, 64)
			} else if flags["to-time"] != "" {
				r.AtRevision = w.pointRevision
			}
			if w.noAtRevision {
				r.AtRevision = 0
			}
			w.verifyFlags = flags
			owner := w.snapshotOwner
			switch {
			case w.snapshotDamaged:
				r.Outcome, r.Message = api.RestoreRefused, "snapshot damaged: 20260101T000000Z-r4242.db has 1048576 bytes, its manifest says 2097152 (truncated?)"
			case owner != "" && owner != flags["cluster-uid"] && owner != flags["accept-cluster"]:
				r.Outcome, r.Message = api.RestoreRefused, "snapshot of another cluster: accept it by naming "+owner
			}
			if w.backupAnn == nil {
				w.backupAnn = map[string]string{}
			}
			w.backupAnn[api.AnnRestoreReport] = r.String()
			w.verified++
			if r.Outcome != api.RestoreVerified {
				j.state, j.finished = facts.JobFailed, w.now
				continue
			}
		case flags["from"] != "" && flags["token"] != "":
			// The in-place restore Job (etcdhook restore --replace): it refuses while a member pod runs
			// on the volume; then ordinal 0's volume holds a new one-member cluster (etcd derives its IDs
			// from the token, which differs per request).
			w.restoreFlags = flags
			if w.pods[0] != nil {
				j.state, j.finished = facts.JobFailed, w.now
				continue
			}
			if w.backupAnn == nil {
				w.backupAnn = map[string]string{}
			}
			if w.snapshotChanged || flags["expect-sha256"] == "" {
				// Only a verified snapshot is restored: it is refused before any data is touched.
				w.backupAnn[api.AnnRestoreReport] = api.RestoreReport{Time: w.now.UTC(), Job: name, Outcome: api.RestoreRefused,
					Message: "snapshot changed since it was verified"}.String()
				j.state, j.finished = facts.JobFailed, w.now
				continue
			}
			w.backupAnn[api.AnnRestoreReport] = api.RestoreReport{Time: w.now.UTC(), Job: name, Outcome: api.RestoreRestored, SHA256: flags["expect-sha256"]}.String()
			w.etcd.members, w.etcd.leader = nil, ""
			h := fnv.New64a()
			h.Write([]byte(flags["token"]))
			w.etcd.clusterID = fmt.Sprintf("%016x", h.Sum64()|1)
			w.data[0], w.owner[0] = w.etcd.add(w.peerURL(0), false), w.uid
			w.restored = flags["from"]
		case flags["claim"] != "" && flags["size"] != "":
			// pvc grow: the claim asks for the size; a volume driver grows it (unless noResizer).
			c := w.pvcs[w.names().PVCOrdinal(flags["claim"])]
			if c == nil || c.clusterUID != flags["cluster-uid"] || w.refuseGrowth {
				// etcdhook pvc grow exits 3 (a refusal): the Job's pod failure policy fails it at once.
				j.state, j.finished, j.refused = facts.JobFailed, w.now, true
				continue
			}
			c.size = flags["size"]
			if w.noResizer {
				j.state, j.finished = facts.JobFailed, w.now // its deadline passes
				continue
			}
			c.capacity = flags["size"]
		case flags["name"] != "" && flags["uid"] != "":
			// statefulset orphan: the StatefulSet goes, its pods and claims stay.
			if w.sts() != nil {
				delete(w.desired[wire.KeyStatefulSet], w.name)
				w.stsSpec, w.stsOrphaned = "", w.stsOrphaned+1
			}
		case flags["claim"] != "":
			// pvc delete re-checks: no member at the ordinal's peer URL, no pod using the claim.
			i := w.names().PVCOrdinal(flags["claim"])
			if w.etcd.byPeer(flags["peer-url"]) != nil || w.pods[i] != nil {
				j.state, j.finished = facts.JobFailed, w.now
				continue
			}
			delete(w.pvcs, i)
			delete(w.data, i)
		}
		j.state, j.finished = facts.JobSucceeded, w.now
	}
}

// step is one round: sync, controllers, agents, Jobs, then time passes.
func (w *world) step(d time.Duration) *Response {
	resp := w.sync()
	w.controllers()
	w.agents()
	w.runJobs()
	w.now = w.now.Add(d)
	return resp
}

// converge steps until the phase is Running and nothing changes, failing after max steps.
func (w *world) converge(max int) {
	w.t.Helper()
	for n := 0; n < max; n++ {
		resp := w.step(5 * time.Second)
		if resp.Status.Phase == api.PhaseRunning && w.stable() {
			return
		}
	}
	var reports []string
	for _, i := range sortedKeys(w.leases) {
		l := w.leases[i]
		reports = append(reports, fmt.Sprintf("%d:%s/%s/%v/%q renewed %s", i, l.report.Role, l.report.MemberID, l.report.Healthy, l.report.Error, w.now.Sub(l.renewed)))
	}
	w.t.Fatalf("no convergence in %d steps: phase %s, message %q, members %v, data %v, leases %v", max, w.status.Phase, w.status.Message, w.etcd.members, w.data, reports)
}

func (w *world) stable() bool {
	before := string(mustJSON(w.lastResp.Children))
	resp := w.sync()
	return string(mustJSON(resp.Children)) == before
}

func (w *world) voterOrdinals() []int {
	var out []int
	for _, m := range w.etcd.members {
		if !m.Learner {
			out = append(out, w.ordinalOf(m))
		}
	}
	sort.Ints(out)
	return out
}

// leaderAuthReport is what the leader's agent reports of auth.json, when the world applies it.
func (w *world) leaderAuthReport() *api.AuthReport {
	if !w.authApplies {
		return nil
	}
	cm := w.desired[wire.KeyConfigMap][w.names().ConfigMap()]
	if cm == nil {
		return nil
	}
	v, _ := cm["data"].(map[string]any)[api.ConfigKeyAuth].(string)
	want, err := api.ParseAuthConfig([]byte(v))
	if err != nil || want == nil {
		return nil
	}
	rep := &api.AuthReport{Applied: want.Hash, Enabled: want.Enabled, Expires: map[string]string{}}
	for _, u := range want.Users {
		rep.Expires[u.Name] = w.userNotAfter.UTC().Format(time.RFC3339)
	}
	return rep
}
