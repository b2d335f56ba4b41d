package sync

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	frozen "github.com/etcdhook/etcdhook/internal/fixture"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The fixtures in hooks/testdata are requests Metacontroller would send at interesting moments, built
// by driving the test world there, and the exact answers. hooks/fixtures_test.go replays them through the
// HTTP handler and e2e/fixtures.sh through `etcdhook serve` with curl; this test keeps the requests in
// step with the world. `go test ./sync -run Fixtures -update` rewrites requests and answers: review the
// diff, the answers are what the hook will do.

var update = flag.Bool("update", false, "rewrite hooks/testdata fixtures")

const fixtureDir = "../hooks/testdata"

// FixtureImage is the image the fixture server runs with (e2e/fixtures.sh passes the same).
var FixtureImage = frozen.Image

type fixture struct {
	name  string
	hook  string // sync, finalize, customize
	build func(w *world)
	// raw, when set, is the request body (error fixtures).
	raw string
}

// atFixtureNow runs build once to learn how long it takes in world time, then again starting that much
// before fixtureNow, so that the request is taken exactly at the frozen clock of the fixture server.
func atFixtureNow(t *testing.T, build func(w *world)) *world {
	probe := newWorldAt(t, 3, fixtureNow)
	build(probe)
	elapsed := probe.now.Sub(fixtureNow)
	w := newWorldAt(t, 3, fixtureNow.Add(-elapsed))
	build(w)
	require.Equal(t, fixtureNow, w.now)
	return w
}

func size(n int32) func(*api.ClusterSpec) { return func(s *api.ClusterSpec) { s.Size = ptr(n) } }

func withDefrag(schedule string) func(*api.ClusterSpec) {
	return func(s *api.ClusterSpec) { s.Maintenance.Defrag = &api.DefragSpec{Schedule: schedule} }
}

// settle converges then lets the reports age a few seconds, as a steady cluster's would.
// useSecrets names two of fixtureSecrets as the cluster's peer and client Secrets (etcd-peer,
// etcd-client).
func useSecrets(w *world, peer, client string) {
	all := fixtureSecrets(w.t)
	w.secrets = map[string]map[string][]byte{"etcd-peer": all[peer], "etcd-client": all[client]}
	w.spec.Security.TLS.Peer.SecretName = "etcd-peer"
	w.spec.Security.TLS.Client.SecretName = "etcd-client"
}

// withBackup sets spec.backup with a credentials Secret.
func withBackup(schedule, destination string) func(*api.ClusterSpec) {
	return func(s *api.ClusterSpec) {
		s.Backup = &api.BackupSpec{Schedule: schedule, Destination: destination, CredentialsSecret: "backup-credentials"}
	}
}

func settle(w *world) {
	w.converge(80)
	w.step(5 * time.Second)
}

// settledThen is a fixture that settles, then edits the spec once.
func settledThen(edit func(*api.ClusterSpec)) func(*world) {
	return func(w *world) {
		settle(w)
		w.setSpec(edit)
	}
}

// The moments below start several fixtures each; every fixture that shares one takes its steps in
// the same order, so the requests (checked byte for byte by TestFixturesUpToDate) do not change.

// withOrphanMember settles, then adds a started member no pod stands for (a legacy peer URL) and lets
// the agents report it.
func withOrphanMember(w *world) {
	settle(w)
	id := w.etcd.add("http://old-etcd-2.legacy.prod.svc:2380", false)
	w.etcd.byID(id).Started = true
	w.agents()
}

// caRotationAsked settles, then asks for a CA rotation (etcd.io/rotate-ca).
func caRotationAsked(w *world) {
	settle(w)
	w.parentAnn = map[string]string{api.AnnRotateCA: "ca-2027"}
}

// inPlaceRestoreAsked settles with backups configured, then asks for an in-place restore of a snapshot.
func inPlaceRestoreAsked(w *world) {
	settle(w)
	w.setSpec(func(s *api.ClusterSpec) { s.Backup = inPlaceBackup() })
	w.step(5 * time.Second)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/prod/demo/20260101T000000Z-r4242.db"}
}

// tlsSwitchOnAsked settles a cluster with TLS off, then switches it on.
func tlsSwitchOnAsked(w *world) {
	w.spec.Security.TLS.Enabled = ptr(false)
	settle(w)
	w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(true) })
}

// backupsOn settles, configures backups and lets one sync render them.
func backupsOn(w *world, schedule, destination string) {
	settle(w)
	w.setSpec(withBackup(schedule, destination))
	w.step(5 * time.Second)
}

// continuousSnap is the snapshot the continuous fixtures' chain follows (in the cluster's folder).
const continuousSnap = "s3://etcd-backups/prod/prod/demo/20260101T110000Z-r4242.db"

// copyOn settles with continuous backup and a copy to a second destination with its own retention.
func copyOn(w *world) {
	settle(w)
	w.setSpec(func(s *api.ClusterSpec) {
		withBackup("0 * * * *", "s3://etcd-backups/prod")(s)
		s.Backup.Continuous = &api.ContinuousBackupSpec{}
		s.Backup.Copy = &api.BackupCopySpec{Destination: "gs://dr-etcd/prod", CredentialsSecret: "dr-credentials",
			Retention: &api.BackupRetention{KeepDaily: ptr(int32(30))}}
	})
	w.step(5 * time.Second)
}

// continuousOn settles with continuous backup on.
func continuousOn(w *world) {
	settle(w)
	w.setSpec(func(s *api.ClusterSpec) {
		withBackup("0 * * * *", "s3://etcd-backups/prod")(s)
		s.Backup.Continuous = &api.ContinuousBackupSpec{}
	})
	w.step(5 * time.Second)
}

// backupOnDemandAsked settles with unscheduled backups, then asks for one (etcd.io/backup-now).
func backupOnDemandAsked(w *world) {
	backupsOn(w, "", "gs://etcd-backups/prod")
	w.parentAnn = map[string]string{api.AnnBackupNow: "before-upgrade-1"}
}

// resized settles a cluster of from members, then asks for to.
func resized(w *world, from, to int32) {
	w.spec.Size = ptr(from)
	settle(w)
	w.setSpec(size(to))
}

// memberDown settles a cluster of size members, then stops member ordinal; the agents report reports
// times, the clock moving on by every after each.
func memberDown(w *world, size int32, ordinal, reports int, every time.Duration) {
	w.spec.Size = ptr(size)
	settle(w)
	w.down[ordinal] = true
	for n := 0; n < reports; n++ {
		w.agents()
		w.now = w.now.Add(every)
	}
}

// clientSecretExpired settles on the user's Secrets, then the client certificate in them expires.
func clientSecretExpired(w *world) {
	useSecrets(w, "peer", "client")
	settle(w)
	w.secrets["etcd-client"] = fixtureSecrets(w.t)["client-expired"]
}

// nineMembersSettled converges a 9-member cluster whose children carry Metacontroller's last-applied.
func nineMembersSettled(w *world) {
	w.spec.Size = ptr(int32(9))
	w.lastApplied = true
	w.converge(200)
	w.step(5 * time.Second)
}

// fixtureAuth declares two roles and two users, one of them with its own Secret name
// (docs/design/20-auth.md §20.1).
func fixtureAuth(enabled bool) *api.AuthSpec {
	return &api.AuthSpec{
		Enabled: enabled,
		Roles: []api.AuthRole{
			{Name: "orders", Permissions: []api.AuthPermission{{Key: "/orders/", Prefix: true, Access: api.AccessReadWrite}, {Key: "/config", Access: api.AccessRead}}},
			{Name: "billing", Permissions: []api.AuthPermission{{Key: "/billing/", Prefix: true, Access: api.AccessReadWrite}}},
		},
		Users: []api.AuthUser{
			{Name: "orders-svc", Roles: []string{"orders"}},
			{Name: "billing-svc", Roles: []string{"billing", "orders"}, SecretName: "demo-billing"},
		},
	}
}

// authSettled settles a cluster with fixtureAuth, which the leader's agent applies and reports (each
// user's certificate valid for 90 days).
func authSettled(w *world, enabled bool) {
	w.spec.Auth = fixtureAuth(enabled)
	w.authApplies, w.userNotAfter = true, fixtureNow.Add(90*24*time.Hour)
	settle(w)
}

// authSettledThen is a fixture that settles with spec.auth enforced and applied, then edits the spec once.
func authSettledThen(edit func(*api.ClusterSpec)) func(*world) {
	return func(w *world) {
		authSettled(w, true)
		w.setSpec(edit)
	}
}

func fixtures() []fixture {
	return append([]fixture{
		{name: "new-cluster", build: func(w *world) {}},
		{name: "new-cluster-size-5-custom", build: func(w *world) {
			w.spec.Size = ptr(int32(5))
			w.spec.Version = "3.5.21"
			w.spec.Storage.StorageClassName = ptr("fast-ssd")
			w.spec.Options = map[string]string{"quota-backend-bytes": "8589934592", "auto-compaction-retention": "1h"}
		}},
		{name: "new-cluster-emptydir", build: func(w *world) {
			w.spec.Size = ptr(int32(1))
			w.spec.Storage.EmptyDir = &corev1EmptyDir
		}},
		{name: "seed-waiting", build: func(w *world) {
			w.opts.SeedBootstrap = true
			w.sync()
			w.controllers()
			w.now = w.now.Add(5 * time.Second)
		}},
		{name: "seed-reporting", build: func(w *world) {
			w.opts.SeedBootstrap = true
			w.sync()
			w.controllers()
			w.agents()
			w.now = w.now.Add(5 * time.Second)
		}},
		{name: "scale-up-permits-next-ordinal", build: func(w *world) {
			resized(w, 1, 3)
		}},
		{name: "learner-pending", build: func(w *world) {
			resized(w, 1, 3)
			w.step(2 * time.Second)
			w.noPromote[1] = true
			w.agents()
		}},
		{name: "learner-promoted-next-join", build: func(w *world) {
			resized(w, 1, 3)
			w.step(2 * time.Second)
			w.agents()
			w.agents()
		}},
		{name: "learner-stuck-removed", build: func(w *world) {
			settle(w)
			w.setSpec(size(4))
			w.noPromote[3] = true
			w.step(5 * time.Second)
			w.step(5 * time.Second)
			w.now = w.now.Add(11 * time.Minute)
			w.agents()
		}},
		{name: "scale-down-leave-intent", build: func(w *world) {
			resized(w, 5, 3)
		}},
		{name: "scale-down-member-left", build: func(w *world) {
			resized(w, 5, 3)
			w.step(2 * time.Second)
		}},
		{name: "scale-down-volume-delete-job", build: func(w *world) {
			resized(w, 5, 3)
			w.step(2 * time.Second)
			w.step(2 * time.Second)
		}},
		{name: "scale-down-volume-deleted", build: func(w *world) {
			resized(w, 5, 4)
			for n := 0; n < 3; n++ {
				w.step(2 * time.Second)
			}
		}},
		{name: "scale-down-agent-dead-remove-job", build: func(w *world) {
			memberDown(w, 5, 4, 4, 30*time.Second)
			w.agents()
			w.setSpec(size(4))
		}},
		{name: "orphan-member-removed", build: withOrphanMember},
		{name: "remove-job-running", build: func(w *world) {
			withOrphanMember(w)
			w.noJobs = true
			w.step(10 * time.Second)
		}},
		{name: "remove-job-succeeded-dropped", build: func(w *world) {
			withOrphanMember(w)
			w.step(5 * time.Second)
			w.agents()
		}},
		{name: "remove-job-failed-backoff", build: func(w *world) {
			withOrphanMember(w)
			w.failJobs = true
			w.step(10 * time.Second)
		}},
		{name: "remove-job-retried", build: func(w *world) {
			withOrphanMember(w)
			w.failJobs = true
			w.step(35 * time.Second)
			w.agents()
		}},
		{name: "dead-member-quorum-to-spare", build: func(w *world) {
			memberDown(w, 5, 2, 6, time.Minute)
		}},
		{name: "dead-member-no-quorum-to-spare", build: func(w *world) {
			memberDown(w, 4, 3, 6, time.Minute)
			w.agents()
			// A second voter's report is stale (its agent hangs) but its pod is still ready.
			w.leases[1].renewed = w.now.Add(-10 * time.Minute) // beyond three healthy renewals (api.HealthyRenewSeconds)
		}},
		{name: "two-voters-one-dead", build: func(w *world) {
			memberDown(w, 2, 1, 7, time.Minute)
		}},
		{name: "stale-lease-blocks-scale-up", build: func(w *world) {
			settle(w)
			w.leases[2].renewed = w.now.Add(-10 * time.Minute) // beyond three healthy renewals (api.HealthyRenewSeconds)
			w.setSpec(size(5))
		}},
		{name: "status-wiped", build: func(w *world) {
			settle(w)
			w.status = api.ClusterStatus{}
		}},
		{name: "split-brain", build: func(w *world) {
			settle(w)
			w.leases[1].report.ClusterID = "aaaaaaaaaaaaaaaa"
		}},
		{name: "foreign-data-on-seed", build: func(w *world) {
			w.pvcs[0] = &simPVC{uid: "pvc-old", clusterUID: "0b0e6a51-old0-uid0-0000-000000000000"}
			w.data[0], w.owner[0] = "1d2e3f4a5b6c7d8e", "0b0e6a51-old0-uid0-0000-000000000000"
			w.step(5 * time.Second)
			w.controllers()
			w.agents()
		}},
		{name: "data-loss-replace-permitted", build: func(w *world) {
			settle(w)
			w.data[1] = ""
			w.agents()
		}},
		{name: "kubectl-scaled-statefulset", build: func(w *world) {
			settle(w)
			w.sts()["spec"].(map[string]any)["replicas"] = float64(1)
			w.stsGen++
			w.controllers()
			w.agents()
		}},
		{name: "upgrade-allowed-partition-reset", build: func(w *world) {
			w.spec.Version = "3.6.15"
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
		}},
		{name: "upgrade-refused-35-below-20", build: func(w *world) {
			w.spec.Version = "3.5.19"
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
		}},
		{name: "upgrade-downgrade-refused", build: settledThen(func(s *api.ClusterSpec) { s.Version = "3.6.10" })},
		{name: "upgrade-in-progress-steps", build: func(w *world) {
			w.spec.Version = "3.5.21"
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
			for n := 0; n < 3; n++ {
				w.step(5 * time.Second)
			}
		}},
		{name: "upgrade-held-member-down", build: func(w *world) {
			w.spec.Version = "3.6.15"
			settle(w)
			w.down[1] = true
			w.step(5 * time.Second)
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
			w.step(5 * time.Second)
		}},
		{name: "bad-image-stuck", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.7.99" })
			w.badImage = "quay.io/coreos/etcd:v3.7.99"
			for n := 0; n < 30; n++ { // past rollRestartGrace: the new pod never became healthy
				w.step(5 * time.Second)
			}
		}},
		{name: "bad-image-reverted", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.7.99" })
			w.badImage = "quay.io/coreos/etcd:v3.7.99"
			for n := 0; n < 4; n++ {
				w.step(5 * time.Second)
			}
			w.setSpec(func(s *api.ClusterSpec) { s.Version = api.DefaultVersion })
			w.step(5 * time.Second)
			w.controllers()
		}},
		{name: "size-edited-mid-step", build: func(w *world) {
			settle(w)
			w.setSpec(size(5))
			w.step(2 * time.Second)
			w.setSpec(size(3))
		}},
		{name: "all-pods-restarted", build: func(w *world) {
			settle(w)
			for _, i := range sortedKeys(w.pods) {
				p := w.pods[i]
				p.uid, p.ready = w.newUID("pod"), false
				w.pods[i] = p
			}
			w.now = w.now.Add(3 * time.Minute)
		}},
		{name: "even-size-running", build: func(w *world) {
			w.spec.Size = ptr(int32(4))
			settle(w)
		}},
		{name: "size-two-disruption-budget", build: func(w *world) {
			w.spec.Size = ptr(int32(2))
			settle(w)
		}},
		{name: "invalid-size-keeps-children", build: settledThen(size(12))},
		{name: "invalid-unsafe-option", build: settledThen(func(s *api.ClusterSpec) { s.Options = map[string]string{"unsafe-no-fsync": "true"} })},
		{name: "unsafe-option-allowed", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				s.Options = map[string]string{"unsafe-no-fsync": "true"}
				s.AllowUnsafeOptions = true
			})
		}},
		{name: "invalid-name-peer-suffix", build: func(w *world) {
			w.name = "demo-peer"
		}},
		// cpu: banana passes the API server (int-or-string) but not the hook's types: the running
		// cluster keeps its children and status says which field, instead of a 422 on every sync.
		{name: "invalid-spec-does-not-decode", build: func(w *world) {
			settle(w)
			w.specRaw = map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "banana"}}}
			w.generation++
		}},
		{name: "invalid-managed-option", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				s.Options = map[string]string{"initial-cluster-state": "new", "data-dir": "/tmp"}
			})
		}},
		// spec.paused (docs/design/06-sync-order.md §6.4): nothing new starts; what is observed is answered.
		{name: "paused-running", build: settledThen(func(s *api.ClusterSpec) { s.Paused = true })},
		{name: "paused-scale-held", build: settledThen(func(s *api.ClusterSpec) { s.Paused = true; s.Size = ptr(int32(5)) })},
		{name: "paused-new-cluster", build: func(w *world) { w.spec.Paused = true }},
		// A StatefulSet rendered by an earlier release: while paused its new template reaches no pod.
		{name: "paused-template-changed", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Paused = true })
			md := w.desired[wire.KeyStatefulSet][w.name]["metadata"].(map[string]any)
			md["annotations"].(map[string]any)[api.AnnTemplateHash] = "0123456789abcdef"
		}},
		// etcd.io/renew-certificates (docs/design/14-tls.md §14.7): asked, then served by every member.
		{name: "tls-renew-certificates-asked", build: func(w *world) {
			settle(w)
			w.parentAnn = map[string]string{api.AnnRenewCertificates: "suspected-leak-2026-01-01"}
		}},
		{name: "tls-renew-certificates-served", build: func(w *world) {
			settle(w)
			w.parentAnn = map[string]string{api.AnnRenewCertificates: "suspected-leak-2026-01-01"}
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		// CA rotation (docs/design/14-tls.md §14.6): asked; the first restart once the new CA is in the Secret;
		// reissued from it, the old CA dropped next; a restart held for a member that is down; done.
		{name: "ca-rotation-asked", build: caRotationAsked},
		{name: "ca-rotation-first-restart", build: func(w *world) {
			caRotationAsked(w)
			w.step(5 * time.Second)
		}},
		{name: "ca-rotation-drop-asked", build: func(w *world) {
			caRotationAsked(w)
			stepUntil(w, func() bool { return caPhase(w) == api.CARotationReissuing || caPhase(w) == api.CARotationDroppingCA })
		}},
		{name: "ca-rotation-restart-held-member-down", build: func(w *world) {
			caRotationAsked(w)
			w.step(5 * time.Second)
			w.step(5 * time.Second)
			w.down[2] = true
			for n := 0; n < 8; n++ {
				w.step(5 * time.Second)
			}
		}},
		{name: "ca-rotation-done", build: func(w *world) {
			caRotationAsked(w)
			stepUntil(w, func() bool { return caPhase(w) == api.CARotationDone })
		}},
		// A hand-edited in-place restore record that retires the live cluster (docs/design/16-backup-restore.md §16.8).
		{name: "restore-in-place-record-retires-live-cluster", build: func(w *world) {
			settle(w)
			rec, _ := json.Marshal(facts.InPlaceRecord{Request: "s3://b/x.db", Retired: []string{w.etcd.clusterID}, Committed: true, Done: true, Seen: []string{"s3://b/x.db"}})
			w.desired[wire.KeyConfigMap][w.names().ConfigMap()]["data"].(map[string]any)[api.ConfigKeyRestoreInPlace] = string(rec)
		}},
		// Volume growth (docs/design/17-growing-volumes.md §17).
		{name: "volume-grow-first-claim", build: func(w *world) {
			settle(w)
			w.growTo("20Gi")
		}},
		{name: "volume-grow-down-member-first", build: func(w *world) {
			settle(w)
			w.down[1] = true
			for n := 0; n < 3; n++ {
				w.step(5 * time.Second)
			}
			w.growTo("20Gi")
		}},
		{name: "volume-grow-job-failed-backoff", build: func(w *world) {
			settle(w)
			w.noResizer = true
			w.growTo("20Gi")
			w.step(5 * time.Second)
		}},
		{name: "volume-grow-job-refused", build: func(w *world) {
			settle(w)
			w.refuseGrowth = true
			w.growTo("20Gi")
			for range 4 {
				w.step(5 * time.Minute) // past every backoff a failure would wait
			}
		}},
		{name: "volume-grow-template-recreate", build: func(w *world) {
			settle(w)
			w.growTo("20Gi")
			// Every claim grown (the world's volumes), the template not yet: this sync starts its Job.
			for n := 0; n < 40 && w.pvcs[2].capacity != "20Gi"; n++ {
				w.step(5 * time.Second)
			}
		}},
		{name: "volume-shrink-refused", build: func(w *world) {
			settle(w)
			w.growTo("5Gi")
		}},
		{name: "statefulset-orphaned-by-hand", build: func(w *world) {
			settle(w)
			delete(w.desired[wire.KeyStatefulSet], w.name)
			w.stsSpec = ""
		}},
		// TLS (docs/design/14-tls.md §14): the user's Secrets, each bad input, expiry, and TLS off.
		{name: "tls-user-secrets-new-cluster", build: func(w *world) { useSecrets(w, "peer", "client") }},
		{name: "tls-user-secrets-running", build: func(w *world) {
			useSecrets(w, "peer", "client")
			settle(w)
		}},
		{name: "tls-secret-missing", build: func(w *world) {
			useSecrets(w, "peer", "client")
			delete(w.secrets, "etcd-client")
		}},
		{name: "tls-secret-names-not-covered", build: func(w *world) { useSecrets(w, "peer", "client-narrow") }},
		{name: "tls-secret-peer-wildcard-svc-only", build: func(w *world) { useSecrets(w, "peer-svc-only", "client") }},
		{name: "tls-secret-expired-running", build: clientSecretExpired},
		// A spec change under an unusable Secret is held: the new pods could not start.
		{name: "tls-secret-expired-scale-held", build: func(w *world) {
			clientSecretExpired(w)
			w.setSpec(size(5))
		}},
		// The StatefulSet was rendered by an earlier release (another template): the roll does not
		// restart a healthy member while a Secret it would start on is unusable.
		{name: "tls-secret-expired-roll-held", build: func(w *world) {
			clientSecretExpired(w)
			md := w.desired[wire.KeyStatefulSet][w.name]["metadata"].(map[string]any)
			md["annotations"].(map[string]any)[api.AnnTemplateHash] = "0123456789abcdef"
		}},
		{name: "tls-members-trust-different-cas", build: func(w *world) {
			settle(w)
			w.leases[2].report.TLSCAs = "9d0c5e7f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5"
		}},
		{name: "tls-secret-change-refused", build: func(w *world) {
			settle(w)
			w.secrets = fixtureSecrets(w.t)
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Client.SecretName = "client" })
		}},
		{name: "tls-certificates-expiring", build: func(w *world) {
			settle(w)
			w.certNotAfter = fixtureNow.Add(10 * 24 * time.Hour)
			w.step(11 * time.Second) // every report renewed (a changed report is written at once)
		}},
		{name: "tls-disabled-new-cluster", build: func(w *world) { w.spec.Security.TLS.Enabled = ptr(false) }},
		// Switching TLS on and off on a running cluster (docs/design/14-tls.md §14.8).
		{name: "tls-switch-on-transition-roll", build: func(w *world) {
			tlsSwitchOnAsked(w)
		}},
		{name: "tls-switch-on-peer-move", build: func(w *world) {
			tlsSwitchOnAsked(w)
			stepUntil(w, func() bool { return slices.Contains(w.peerSchemesAsked(), "https") })
		}},
		{name: "tls-switch-on-peer-move-member-down", build: func(w *world) {
			tlsSwitchOnAsked(w)
			// One member has moved and the second moved in the same step; the last one dies before its turn:
			// it is asked (its report was still fresh) and keeps the turn, nothing else moves, and once its
			// Lease is stale it is Degraded like any member that is down.
			stepUntil(w, func() bool {
				s := w.statusTLSSwitch()
				return s != nil && s.Phase == api.TLSSwitchPeers && s.Switched == 1
			})
			for _, m := range w.etcd.members {
				if facts.PeerScheme(m.PeerURL) == "http" {
					w.down[w.ordinalOf(m)] = true
				}
			}
			for n := 0; n < 8; n++ {
				w.step(5 * time.Second)
			}
		}},
		{name: "tls-switch-on-final-roll", build: func(w *world) {
			tlsSwitchOnAsked(w)
			stepUntil(w, func() bool { s := w.statusTLSSwitch(); return s != nil && s.Phase == api.TLSSwitchRollingOut })
		}},
		{name: "tls-switch-off-transition-roll", build: settledThen(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) })},
		// The user's Secrets are checked while a switch off's transition template mounts them: one gone
		// holds the switch before anything restarts.
		{name: "tls-switch-off-secret-missing", build: func(w *world) {
			useSecrets(w, "peer", "client")
			settle(w)
			delete(w.secrets, "etcd-client")
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) })
		}},
		// One that expires during the transition roll holds the roll's next restart.
		{name: "tls-switch-off-secret-expired-roll-held", build: func(w *world) {
			useSecrets(w, "peer", "client")
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) })
			w.step(5 * time.Second)
			w.secrets["etcd-client"] = fixtureSecrets(w.t)["client-expired"]
			w.step(5 * time.Second)
		}},
		// etcd.io/hold-tls-switch: every peer URL moved, both schemes stay served until it goes.
		{name: "tls-switch-held-before-final-roll", build: func(w *world) {
			w.spec.Security.TLS.Enabled = ptr(false)
			settle(w)
			w.parentAnn = map[string]string{api.AnnHoldTLSSwitch: "clients-moving"}
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(true) })
			stepUntil(w, func() bool { s := w.statusTLSSwitch(); return s != nil && s.Switched == 3 })
			w.step(5 * time.Second)
		}},
		// No member list (quorum lost): the switch waits, the template stays as it is.
		{name: "tls-switch-held-without-quorum", build: func(w *world) {
			w.spec.Security.TLS.Enabled = ptr(false)
			settle(w)
			w.down[1], w.down[2] = true, true
			for n := 0; n < 10; n++ {
				w.step(5 * time.Second)
			}
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(true) })
		}},
		// The Secrets' names stay while a switch runs (the members serve the certificates they started on).
		{name: "tls-switch-secret-change-refused", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) })
			stepUntil(w, func() bool { s := w.statusTLSSwitch(); return s != nil && s.Phase == api.TLSSwitchPeers })
			w.secrets = fixtureSecrets(w.t)
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled, s.Security.TLS.Peer.SecretName = ptr(true), "peer" })
		}},
		// A CA rotation in progress finishes before TLS is switched off.
		{name: "tls-switch-waits-for-ca-rotation", build: func(w *world) {
			caRotationAsked(w)
			w.step(5 * time.Second)
			w.step(5 * time.Second)
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) })
		}},
		// Switching TLS off on a running cluster keeps the certificates the members use: another Secret
		// with it is refused (docs/design/14-tls.md §14.8).
		{name: "invalid-tls-change", build: func(w *world) {
			settle(w)
			w.secrets = fixtureSecrets(w.t)
			w.setSpec(func(s *api.ClusterSpec) { s.Security.TLS.Enabled, s.Security.TLS.Peer.SecretName = ptr(false), "peer" })
		}},
		// The StatefulSet and ConfigMap are gone and the spec asks for a downgrade: there is nothing to
		// render from, and every other child is answered exactly as last applied (no deletion, no 4xx).
		{name: "invalid-spec-no-record-children-kept", build: func(w *world) {
			w.lastApplied = true
			settle(w)
			delete(w.desired, wire.KeyStatefulSet)
			delete(w.desired, wire.KeyConfigMap)
			w.status = api.ClusterStatus{}
			w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.5.21" })
		}},
		{name: "invalid-version-format", build: settledThen(func(s *api.ClusterSpec) { s.Version = "v3.6" })},
		{name: "invalid-spec-new-cluster", build: func(w *world) {
			w.spec.Size = ptr(int32(0))
		}},
		{name: "hook-v2-keys", build: func(w *world) {
			resized(w, 5, 3)
			w.v2 = true
		}},
		{name: "metacontroller-last-applied", build: func(w *world) {
			settle(w)
			w.lastApplied = true
		}},
		{name: "finalizing", hook: "finalize", build: func(w *world) {
			settle(w)
			w.deleting = true
		}},
		{name: "customize", hook: "customize", build: func(w *world) {}},
		{name: "customize-tls-secrets", hook: "customize", build: func(w *world) { useSecrets(w, "peer", "client") }},
		// Named Secrets stay related with TLS off: a switch off's transition template mounts them.
		{name: "customize-tls-secrets-tls-off", hook: "customize", build: func(w *world) {
			useSecrets(w, "peer", "client")
			w.spec.Security.TLS.Enabled = ptr(false)
		}},
		// A settled 9-member cluster: what an idle cluster's periodic resync sends (cmd/loadtest -simulate).
		{name: "nine-members-idle", hook: "bench", build: func(w *world) {
			nineMembersSettled(w)
		}},
		{name: "nine-members-scaling", hook: "bench", build: func(w *world) {
			nineMembersSettled(w)
			w.setSpec(size(7))
		}},
		// Backups and restores (docs/design/16-backup-restore.md §16).
		{name: "backup-scheduled", build: settledThen(withBackup("0 * * * *", "s3://etcd-backups/prod?endpoint=https://minio.storage:9000&region=us-east-1&use_path_style=true"))},
		{name: "backup-on-demand", build: backupOnDemandAsked},
		{name: "backup-on-demand-succeeded", build: func(w *world) {
			backupOnDemandAsked(w)
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		{name: "backup-failing", build: func(w *world) {
			backupsOn(w, "", "s3://etcd-backups/prod")
			w.parentAnn = map[string]string{api.AnnBackupNow: "t1"}
			w.step(5 * time.Second)
			w.step(time.Minute)
			w.failBackups = true
			w.parentAnn = map[string]string{api.AnnBackupNow: "t2"}
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		{name: "backup-refused", build: func(w *world) {
			backupsOn(w, "", "s3://etcd-backups/prod")
			w.refuseBackups = true
			w.parentAnn = map[string]string{api.AnnBackupNow: "t1"}
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		// The newest success is three hours old under an hourly schedule: stale.
		{name: "backup-stale", build: func(w *world) {
			backupsOn(w, "0 * * * *", "s3://etcd-backups/prod")
			w.backupAnn = map[string]string{api.AnnBackupSuccess: api.BackupReport{Time: w.now.Add(-3 * time.Hour), Snapshot: "s3://etcd-backups/prod/prod/demo/x-r1.db", Revision: 1, Size: 1}.String()}
		}},
		// A report dated ahead of the hook's clock, and one that does not parse: ignored and named.
		{name: "backup-report-distrusted", build: func(w *world) {
			backupsOn(w, "", "s3://etcd-backups/prod")
			w.backupAnn = map[string]string{
				api.AnnBackupSuccess: api.BackupReport{Time: w.now.Add(time.Hour), Snapshot: "s3://x/y.db"}.String(),
				api.AnnBackupFailure: "{not json",
			}
		}},
		{name: "backup-invalid-destination", build: settledThen(withBackup("0 * * * *", "s3://etcd-backups/prod?endpiont=https://minio:9000"))},
		{name: "backup-file-on-claim", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				withBackup("@daily", "file:///etcd")(s)
				s.Backup.VolumeClaimName = "etcd-backups"
				s.Backup.Retention = api.BackupRetention{KeepLast: ptr(int32(3)), MaxAge: &metav1.Duration{Duration: 72 * time.Hour}}
			})
		}},
		// Configured three hours ago, never succeeded: stale.
		{name: "backup-stale-never-succeeded", build: func(w *world) {
			backupsOn(w, "0 * * * *", "s3://etcd-backups/prod")
			w.noJobs = true
			for range 36 {
				w.step(5 * time.Minute)
			}
		}},
		{name: "backup-cronjobs-not-registered", build: func(w *world) {
			w.noCronJobs = true
			settle(w)
			w.setSpec(withBackup("0 * * * *", "s3://etcd-backups/prod"))
		}},
		// A new token while the previous token's Job still runs: both Jobs are kept.
		{name: "backup-on-demand-new-token-while-running", build: func(w *world) {
			backupsOn(w, "", "gs://etcd-backups/prod")
			w.noJobs = true
			w.parentAnn = map[string]string{api.AnnBackupNow: "t1"}
			w.step(5 * time.Second)
			w.parentAnn = map[string]string{api.AnnBackupNow: "t2"}
		}},
		{name: "backup-now-without-backup", build: func(w *world) {
			settle(w)
			w.parentAnn = map[string]string{api.AnnBackupNow: "t1"}
		}},
		// Backups switched off: the CronJob, Lease and account go.
		{name: "backup-removed", build: func(w *world) {
			backupsOn(w, "0 * * * *", "s3://etcd-backups/prod")
			w.setSpec(func(s *api.ClusterSpec) { s.Backup = nil })
		}},
		// Calendar retention tiers: the Jobs and the writer get them as flags; no keepLast default.
		{name: "backup-retention-tiers", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				withBackup("0 * * * *", "s3://etcd-backups/prod")(s)
				s.Backup.Retention = api.BackupRetention{KeepHourly: ptr(int32(24)), KeepDaily: ptr(int32(7)), KeepWeekly: ptr(int32(4))}
				s.Backup.Continuous = &api.ContinuousBackupSpec{}
			})
			w.step(5 * time.Second)
		}},
		// Continuous backup (docs/design/16-backup-restore.md §16.10).
		{name: "backup-continuous", build: func(w *world) {
			continuousOn(w)
			at := w.now.Add(-4 * time.Second)
			w.backupAnn = map[string]string{api.AnnBackupContinuous: api.ContinuousReport{Time: w.now.Add(-time.Second),
				Snapshot: continuousSnap, ChainStart: 4242, Revision: 9876, RevisionTime: &at}.String()}
		}},
		// Encrypted at rest (§16.11): every backup pod mounts the encryption Secret; only its name is in
		// the answer.
		{name: "backup-encrypted", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				withBackup("0 * * * *", "s3://etcd-backups/prod")(s)
				s.Backup.Continuous = &api.ContinuousBackupSpec{}
				s.Backup.Encryption = &api.EncryptionSpec{SecretName: "backup-keys"}
			})
			w.step(5 * time.Second)
		}},
		// A copy in a second destination (§16.12): the backup pods get its flags and credentials; its
		// last pass in status; a failing pass is BackupCopyFailing; a report naming another folder is
		// distrusted.
		{name: "backup-copy", build: func(w *world) {
			copyOn(w)
			w.backupAnn = map[string]string{api.AnnBackupCopy: api.CopyReport{Time: w.now.Add(-time.Second),
				Snapshot: "gs://dr-etcd/prod/prod/demo/20260101T110000Z-r4242.db", Revision: 9876, Copied: 3}.String()}
		}},
		{name: "backup-copy-failing", build: func(w *world) {
			copyOn(w)
			w.backupAnn = map[string]string{api.AnnBackupCopy: api.CopyReport{Time: w.now.Add(-time.Second),
				Message: "copy to gs://dr-etcd/prod: listing the copy: storage: bucket doesn't exist"}.String()}
		}},
		{name: "backup-copy-report-distrusted", build: func(w *world) {
			copyOn(w)
			w.backupAnn = map[string]string{api.AnnBackupCopy: api.CopyReport{Time: w.now.Add(-time.Second),
				Snapshot: "gs://elsewhere/x/20260101T110000Z-r4242.db", Revision: 9876}.String()}
		}},
		{name: "restore-encrypted", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials",
				Encryption: &api.EncryptionSpec{SecretName: "backup-keys"}, ToRevision: ptr(int64(9000))}
		}},
		// The newest restorable point is five minutes old, and the writer says why.
		{name: "backup-continuous-lagging", build: func(w *world) {
			continuousOn(w)
			at := w.now.Add(-5 * time.Minute)
			w.backupAnn = map[string]string{api.AnnBackupContinuous: api.ContinuousReport{Time: w.now.Add(-time.Second),
				Snapshot: continuousSnap, ChainStart: 4242, Revision: 9876, RevisionTime: &at,
				Message: "uploading revisions 9877-9901: s3://etcd-backups/prod is not reachable"}.String()}
		}},
		// A report naming a snapshot outside the cluster's folder (a hand edit): ignored and named.
		{name: "backup-continuous-report-distrusted", build: func(w *world) {
			continuousOn(w)
			at := w.now.Add(-4 * time.Second)
			w.backupAnn = map[string]string{api.AnnBackupContinuous: api.ContinuousReport{Time: w.now.Add(-time.Second),
				Snapshot: "s3://elsewhere/other/20260101T000000Z-r1.db", ChainStart: 1, Revision: 2, RevisionTime: &at}.String()}
		}},
		{name: "backup-continuous-invalid", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				withBackup("", "s3://etcd-backups/prod")(s)
				s.Backup.Continuous = &api.ContinuousBackupSpec{ChunkInterval: &metav1.Duration{Duration: 30 * time.Second}, MaxLag: &metav1.Duration{Duration: 40 * time.Second}}
			})
		}},
		{name: "restore-to-time", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials",
				ToTime: &metav1.Time{Time: time.Date(2025, 12, 31, 23, 15, 0, 0, time.UTC)}}
		}},
		{name: "restore-two-points", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials",
				ToRevision: ptr(int64(100)), ToTime: &metav1.Time{Time: time.Date(2025, 12, 31, 23, 15, 0, 0, time.UTC)}}
		}},
		{name: "restore-new-cluster", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest?endpoint=https://minio.storage:9000&region=us-east-1&use_path_style=true", CredentialsSecret: "minio-credentials"}
		}},
		{name: "restore-failed", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials"}
			w.restoreFail = api.ReasonRestoreRefused + ": spec.restore.from: no such snapshot: no complete snapshot of prod/demo under s3://etcd-backups/prod/prod/demo/"
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		{name: "restore-retrying", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials"}
			w.restoreFail = api.ReasonRestoreFailed + ": attempt 2 failed, retrying at 2026-01-01T12:00:10Z, until 2026-01-01T12:59:55Z: s3://etcd-backups/prod is not reachable or refused the credentials: dial tcp 10.0.0.9:443: connect: connection refused"
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		{name: "restore-done", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "minio-credentials"}
			w.restored = "s3://etcd-backups/prod/prod/demo/20260101T000000Z-r4242.db"
			settle(w)
		}},
		{name: "restore-added-running", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				s.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod/latest", CredentialsSecret: "backup-credentials"}
			})
		}},
		{name: "restore-invalid-source", build: func(w *world) {
			w.spec.Restore = &api.RestoreSpec{From: "s3://etcd-backups/prod"}
		}},
		// In-place restores (etcd.io/restore-from, docs/design/16-backup-restore.md §16.8): asked of a running cluster,
		// the verify Job checks the snapshot while it serves; once it passed the members stop; with none
		// left the restore Job runs; once it succeeded pod 0 starts on the restored data while the
		// replaced cluster's reports are ignored. A snapshot refused by the verification (nothing
		// stopped), a restore Job that failed after the stop, a value refused.
		{name: "restore-in-place-verifying", build: func(w *world) {
			inPlaceRestoreAsked(w)
		}},
		{name: "restore-in-place-stopping", build: func(w *world) {
			inPlaceRestoreAsked(w)
			w.step(5 * time.Second) // the verify Job passes
		}},
		{name: "restore-in-place-refused-by-verification", build: func(w *world) {
			inPlaceRestoreAsked(w)
			w.snapshotDamaged = true
			w.step(5 * time.Second) // the verify Job refuses the snapshot
		}},
		{name: "restore-in-place-job", build: func(w *world) {
			backupsOn(w, "0 * * * *", "s3://etcd-backups/prod?endpoint=https://minio.storage:9000")
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest?endpoint=https://minio.storage:9000"}
			w.step(5 * time.Second) // the verify Job passes
			w.noJobs = true
			for range 3 {
				w.step(5 * time.Second)
			}
		}},
		// To a point (etcd.io/restore-to): the verify Job looks for the time; once it passed and the
		// members stopped, the restore Job restores the revision the verification found.
		{name: "restore-in-place-to-time-verifying", build: func(w *world) {
			inPlaceRestoreAsked(w)
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: "2026-01-01T00:55:00Z"}
		}},
		{name: "restore-in-place-to-time-job", build: func(w *world) {
			inPlaceRestoreAsked(w)
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: "2026-01-01T00:55:00Z"}
			w.pointRevision = 5017
			w.step(5 * time.Second) // the verify Job passes
			w.noJobs = true
			for range 3 {
				w.step(5 * time.Second)
			}
		}},
		{name: "restore-in-place-starting", build: func(w *world) {
			inPlaceRestoreAsked(w)
			for range 4 {
				w.step(5 * time.Second)
			}
		}},
		{name: "restore-in-place-failed", build: func(w *world) {
			inPlaceRestoreAsked(w)
			w.step(5 * time.Second) // the verify Job passes; then the restore Job fails (the store, not the snapshot)
			w.failJobs = true
			for range 4 {
				w.step(5 * time.Second)
			}
		}},
		// spec.backup.restoreOnQuorumLoss: two of three members ran without their data for
		// deadMemberSeconds; the sync that starts the restore of the destination's newest snapshot
		// (its verification: the members still running are not stopped before it passed).
		{name: "restore-on-quorum-loss", build: func(w *world) {
			w.spec.Backup = &api.BackupSpec{Destination: "s3://etcd-backups/prod?endpoint=https://minio.storage:9000", CredentialsSecret: "minio-credentials", RestoreOnQuorumLoss: true}
			settle(w)
			w.loseVolumes(1, 2)
			for range 60 {
				w.step(5 * time.Second)
			}
		}},
		// spec.recovery Manual (the default): two of three members lost their data for deadMemberSeconds;
		// the plan is shown (demo-0 survives at revision 100) and nothing is asked of any member.
		{name: "recovery-planned", build: func(w *world) {
			settle(w)
			w.loseVolumes(1, 2)
			for range 60 {
				w.step(5 * time.Second)
			}
		}},
		// FromSurvivor, five members, three lost: demo-4 holds the newer revision and survives; demo-1,
		// which holds data too, is asked to set it aside first.
		{name: "recovery-fencing", build: func(w *world) {
			w.spec.Size = ptr(int32(5))
			withRecovery(api.QuorumLossFromSurvivor)(&w.spec)
			settle(w)
			w.loseVolumes(0, 2, 3)
			w.revision[1], w.revision[4] = 120, 130
			for range 60 {
				w.step(5 * time.Second)
			}
		}},
		{name: "restore-in-place-invalid", build: func(w *world) {
			settle(w)
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/prod/demo/snapshot.db#x"}
		}},
		// Sizes reach status.members; 1.7 GiB of the default 2 GiB quota raises DatabaseNearQuota.
		{name: "database-near-quota", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1740<<20, 300<<20
			w.step(5 * time.Second)
		}},
		// The same sizes under an 8 GiB quota (spec.options): no warning.
		{name: "database-sizes-under-quota", build: func(w *world) {
			w.spec.Options = map[string]string{"quota-backend-bytes": "8589934592"}
			settle(w)
			w.dbSize, w.dbSizeInUse = 1740<<20, 300<<20
			w.step(5 * time.Second)
		}},
		// spec.maintenance.space: live data past 70% of a 32 MiB quota raises it to 64 MiB (the StatefulSet's
		// flag, the ConfigMap's space-quota, status.space), and the roll starts.
		{name: "space-quota-raised", build: func(w *world) {
			withSpace(32<<20, "128Mi", "")(&w.spec)
			settle(w)
			w.dbSize, w.dbSizeInUse = 25<<20, 23<<20
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		// The same at the maximum: nothing is raised and status says what to do.
		{name: "space-at-max", build: func(w *world) {
			withSpace(32<<20, "32Mi", "")(&w.spec)
			settle(w)
			w.dbSize, w.dbSizeInUse = 25<<20, 23<<20
			w.step(5 * time.Second)
			w.step(5 * time.Second)
		}},
		// NOSPACE raised by two members: DatabaseFull names them; the members stay healthy voters (no
		// false QuorumLost) and the cluster Available.
		{name: "database-full", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 2<<30, 2<<30
			w.alarms = []string{api.AlarmNoSpace + "@" + w.etcd.members[0].ID, api.AlarmNoSpace + "@" + w.etcd.members[2].ID}
			w.step(5 * time.Second)
		}},
		// A NOSPACE alarm of a member no longer in the list (etcd keeps a removed member's alarm, and
		// refuses writes for it): DatabaseFull names its ID, and the first follower is asked to disarm it.
		{name: "alarm-unknown-member", build: func(w *world) {
			settle(w)
			w.alarms = []string{api.AlarmNoSpace + "@1234567890abcdef"}
			w.step(5 * time.Second)
		}},
		{name: "invalid-quota-option", build: settledThen(func(s *api.ClusterSpec) { s.Options = map[string]string{"quota-backend-bytes": "8Gi"} })},
		// spec.network: clients from one app and one namespace, metrics from another namespace.
		{name: "network-client-from", build: func(w *world) {
			w.spec.Network.ClientFrom = []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"etcd-client": "true"}}},
			}
			w.spec.Network.MetricsNamespace = "observability"
			settle(w)
		}},
		// Switched off: the NetworkPolicy is released.
		{name: "network-policy-off", build: settledThen(func(s *api.ClusterSpec) { s.Network.Policy = ptr(false) })},
		{name: "network-invalid", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				s.Network.ClientFrom = []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Is", Values: []string{"api"}}}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"192.168.0.0/24"}}},
					{},
				}
				s.Network.MetricsNamespace = "Monitoring"
			})
		}},
		// A registration without networkpolicies: no policy, and a condition saying the ports are open.
		{name: "network-policy-not-registered", build: func(w *world) {
			w.noNetworkPolicies = true
			settle(w)
		}},
		// A scheduled pass (daily at 03:00 UTC; the fixture clock is past it): the first follower whose
		// file is at least half free is asked first, on its Lease only.
		{name: "defrag-follower-first", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
			w.step(5 * time.Second)
			w.setSpec(withDefrag("0 3 * * *"))
		}},
		// The followers are done: the leader goes last.
		{name: "defrag-leader-last", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
			w.setSpec(withDefrag("0 3 * * *"))
			for range 3 {
				w.step(5 * time.Second)
			}
		}},
		// A member is down: nobody is asked, and the condition says why.
		{name: "defrag-held-unhealthy", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
			w.down[2] = true
			w.step(5 * time.Second)
			w.step(5 * time.Second)
			w.setSpec(withDefrag("0 3 * * *"))
		}},
		// A member defragmenting keeps its turn; the scale-up asked meanwhile waits for it (no member
		// joins beside a defragmentation), and the cluster is not Degraded for it.
		{name: "defrag-running-keeps-turn", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
			w.slowDefrag = true
			w.setSpec(withDefrag("0 3 * * *"))
			w.step(5 * time.Second)
			w.step(5 * time.Second)
			w.setSpec(size(5))
		}},
		// Files mostly in use: a scheduled pass asks nobody.
		{name: "defrag-below-threshold", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1<<30, 900<<20
			w.step(5 * time.Second) // every agent reports the sizes: 12 % free, below the 50 % threshold
			w.setSpec(withDefrag("0 3 * * *"))
		}},
		// etcd.io/defrag-now: every member, whatever its free space, without a schedule.
		{name: "defrag-now", build: func(w *world) {
			settle(w)
			w.dbSize, w.dbSizeInUse = 1<<30, 900<<20
			w.parentAnn = map[string]string{api.AnnDefragNow: "before-upgrade"}
		}},
		{name: "defrag-invalid", build: func(w *world) {
			settle(w)
			w.setSpec(func(s *api.ClusterSpec) {
				s.Maintenance.Defrag = &api.DefragSpec{Schedule: "TZ=Europe/Paris 0 3 * * *", MinFreePercent: ptr(int32(0))}
			})
		}},
		// etcd users and roles (docs/design/20-auth.md §20): declared on a running cluster, enforced, a user
		// added, a role changed, a user and a role removed, spec.auth removed once disabled; then each form
		// validateAuth or ValidateChange refuses, on a cluster whose auth is enforced.
		{name: "auth-declared-running", build: settledThen(func(s *api.ClusterSpec) { s.Auth = fixtureAuth(false) })},
		{name: "auth-enabled-in-sync", build: func(w *world) {
			authSettled(w, false)
			w.setSpec(func(s *api.ClusterSpec) { s.Auth.Enabled = true })
			w.step(5 * time.Second) // the leader's agent applies the new auth.json and reports it
		}},
		{name: "auth-user-added", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Users = append(s.Auth.Users, api.AuthUser{Name: "audit", Roles: []string{"orders", "billing", "orders"}})
		})},
		{name: "auth-role-changed", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Roles[1].Permissions = []api.AuthPermission{{Key: "/billing/", Prefix: true, Access: api.AccessRead}, {Key: "/billing-config", Access: api.AccessWrite}}
		})},
		{name: "auth-user-and-role-removed", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Roles, s.Auth.Users = s.Auth.Roles[:1], s.Auth.Users[:1]
		})},
		{name: "auth-removed-disabled", build: func(w *world) {
			authSettled(w, false)
			w.setSpec(func(s *api.ClusterSpec) { s.Auth = nil })
		}},
		{name: "auth-invalid-overlapping-ranges", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Roles[0].Permissions = append(s.Auth.Roles[0].Permissions, api.AuthPermission{Key: "/orders/archive", Access: api.AccessRead})
			s.Auth.Roles[1].Permissions = append(s.Auth.Roles[1].Permissions, api.AuthPermission{Key: "/billing/", Access: api.AccessWrite})
		})},
		{name: "auth-invalid-key-ranges", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Roles[1].Permissions = []api.AuthPermission{{Key: "", Access: api.AccessRead}, {Key: "/billing/", Prefix: true, Access: "rw"}}
		})},
		{name: "auth-invalid-unknown-role", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Users[1].Roles = []string{"billing", "admin", "root"}
		})},
		// The last names the Secret the same edit gives spec.backup for its credentials: the whole edit waits.
		{name: "auth-invalid-secret-names", build: authSettledThen(func(s *api.ClusterSpec) {
			s.Auth.Users[1].SecretName = "demo-user-orders-svc"
			s.Auth.Users = append(s.Auth.Users, api.AuthUser{Name: "audit", Roles: []string{"orders"}, SecretName: "demo-root-tls"},
				api.AuthUser{Name: "ops", Roles: []string{"orders"}, SecretName: "demo-client-tls"},
				api.AuthUser{Name: "backups", Roles: []string{"orders"}, SecretName: "demo-backup-credentials"})
			withBackup("0 * * * *", "s3://etcd-backups/prod")(s)
			s.Backup.CredentialsSecret = "demo-backup-credentials"
		})},
		{name: "auth-removed-while-enabled", build: authSettledThen(func(s *api.ClusterSpec) { s.Auth = nil })},
		// Disabled, and removed before the leader's agent applied the disable (etcd still enforces).
		{name: "auth-removed-before-disable-applied", build: func(w *world) {
			authSettled(w, true)
			w.setSpec(func(s *api.ClusterSpec) { s.Auth.Enabled = false })
			w.sync()
			w.now = w.now.Add(2 * time.Second)
			w.setSpec(func(s *api.ClusterSpec) { s.Auth = nil })
		}},
		{name: "error-malformed-json", raw: `{"parent": {"apiVersion": "etcd.io/v1alpha1",`},
		{name: "error-wrong-kind", raw: `{"parent":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","namespace":"prod","uid":"u"}},` + emptyGroups(nil) + `}`},
		{name: "error-missing-uid", raw: `{"parent":{"apiVersion":"etcd.io/v1alpha1","kind":"EtcdCluster","metadata":{"name":"demo","namespace":"prod"},"spec":{}},` + emptyGroups(nil) + `}`},
		{name: "error-undeclared-child-type", raw: `{"parent":` + rawParent + `,` + emptyGroups(map[string]string{"Secret.v1": `{"demo-tls":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"demo-tls","namespace":"prod"}}}`}) + `}`},
		{name: "error-child-wrong-namespace", raw: `{"parent":` + rawParent + `,` + emptyGroups(map[string]string{wire.KeyConfigMap: `{"demo-config":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"demo-config","namespace":"other"}}}`}) + `}`},
		// Absent is not empty: an answer to these would delete every object of the missing kinds.
		{name: "error-children-absent", raw: `{"parent":` + rawParent + `,"related":{"Pod.v1":{},"PersistentVolumeClaim.v1":{}}}`},
		{name: "error-child-group-absent", raw: `{"parent":` + rawParent + `,` + emptyGroups(map[string]string{wire.KeyLease: "-"}) + `}`},
		// finalizing about a parent that is not being deleted would release every child.
		{name: "error-finalizing-live-parent", raw: `{"parent":` + rawParent + `,` + emptyGroups(nil) + `,"finalizing":true}`},
	}, standbyFixtures()...)
}

// rawParent is a minimal valid parent for the hand-written error fixtures.
const rawParent = `{"apiVersion":"etcd.io/v1alpha1","kind":"EtcdCluster","metadata":{"name":"demo","namespace":"prod","uid":"u1"},"spec":{}}`

// emptyGroups renders "children" and "related" with every declared group empty, as Metacontroller
// sends them; extra replaces a group's object map (or adds an undeclared group), "-" leaves it out.
func emptyGroups(extra map[string]string) string {
	keys := append([]string{}, childKeys...)
	for _, k := range sortedKeys(extra) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var parts []string
	for _, k := range keys {
		v, ok := extra[k]
		switch {
		case v == "-":
			continue
		case !ok:
			v = "{}"
		}
		parts = append(parts, fmt.Sprintf("%q:%s", k, v))
	}
	return `"children":{` + strings.Join(parts, ",") + `},"related":{"Pod.v1":{},"PersistentVolumeClaim.v1":{}}`
}

// request renders a fixture's request body.
func (fx fixture) request(t *testing.T) []byte {
	if fx.raw != "" {
		return []byte(fx.raw + "\n")
	}
	w := atFixtureNow(t, fx.build)
	var body any
	switch fx.hook {
	case "customize":
		body = map[string]any{"controller": controllerJSON(), "parent": w.parentJSON()}
	default:
		req := w.request()
		req.Controller = mustJSON(controllerJSON())
		req.Finalizing = fx.hook == "finalize"
		body = req
	}
	return canonical(t, mustJSON(body))
}

// controllerJSON is the registration as Metacontroller sends it with every request (abridged to spec).
func controllerJSON() map[string]any {
	return map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "etcdhook"},
		"spec":     map[string]any{"generateSelector": true, "parentResource": map[string]any{"apiVersion": api.APIVersion, "resource": "etcdclusters"}},
	}
}

// canonical is the fixture file form: keys sorted, two-space indent (what `jq -S .` prints).
func canonical(t testing.TB, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// expected computes the answer with the package functions (the HTTP layer adds only encoding).
func (fx fixture) expected(t *testing.T, req []byte) (int, []byte) {
	if fx.hook == "customize" {
		var cr CustomizeRequest
		require.NoError(t, json.Unmarshal(req, &cr))
		resp, err := Customize(&cr)
		require.NoError(t, err)
		return 200, canonical(t, mustJSON(resp))
	}
	var r Request
	if err := json.Unmarshal(req, &r); err != nil {
		return 400, nil
	}
	if fx.hook == "finalize" {
		r.Finalizing = true
	}
	resp, err := Compute(&r, fixtureNow, Options{Image: FixtureImage})
	if err != nil {
		return 422, nil
	}
	return 200, canonical(t, mustJSON(resp))
}

func TestFixturesUpToDate(t *testing.T) {
	fxs := fixtures()
	names := map[string]bool{}
	for _, fx := range fxs {
		hook := fx.hook
		if hook == "" {
			hook = "sync"
		}
		base := filepath.Join(fixtureDir, hook, fx.name)
		require.False(t, names[base], "duplicate fixture %s", fx.name)
		names[base] = true
		req := fx.request(t)
		code, resp := fx.expected(t, req)
		if *update {
			require.NoError(t, os.MkdirAll(filepath.Dir(base), 0o755))
			require.NoError(t, os.WriteFile(base+".request.json", req, 0o644))
			if code == 200 {
				require.NoError(t, os.WriteFile(base+".response.json", resp, 0o644))
				_ = os.Remove(base + ".code")
			} else {
				_ = os.Remove(base + ".response.json")
				require.NoError(t, os.WriteFile(base+".code", []byte(fmtInt(code)+"\n"), 0o644))
			}
			continue
		}
		have, err := os.ReadFile(base + ".request.json")
		require.NoError(t, err, "missing fixture %s: run go test ./sync -run Fixtures -update", base)
		require.Equal(t, string(req), string(have), "fixture request %s is out of date with the world", base)
		if code == 200 {
			want, err := os.ReadFile(base + ".response.json")
			require.NoError(t, err)
			require.Equal(t, string(want), string(resp), "fixture response %s", base)
		}
	}
	// No stray files: every fixture on disk is one of the list.
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "*.request.json"))
	sort.Strings(files)
	for _, f := range files {
		require.True(t, names[f[:len(f)-len(".request.json")]], "stray fixture %s", f)
	}
}

func fmtInt(n int) string { return string(mustJSON(n)) }

var corev1EmptyDir = corev1.EmptyDirVolumeSource{}
