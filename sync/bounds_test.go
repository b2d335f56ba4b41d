package sync

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Values inside strings and status lists are bounded before use (sync/facts/bounds.go, api/bounds.go). Each test
// here failed on main before the bounds: the answer grew with the hand-edited value.

// editChild rewrites one observed child of the request through f (the request is what the hook gets).
func editChild(t testing.TB, req *Request, key, name string, f func(obj map[string]any)) {
	t.Helper()
	group := req.Children[key]
	for k, raw := range group {
		if k != name && !strings.HasSuffix(k, "/"+name) {
			continue
		}
		var obj map[string]any
		require.NoError(t, json.Unmarshal(raw, &obj))
		f(obj)
		group[k] = mustJSON(obj)
		return
	}
	t.Fatalf("no child %s %s in the request", key, name)
}

func setAnnotation(obj map[string]any, key, value string) {
	md := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[key] = value
}

func answerBytes(t testing.TB, req *Request, w *world) (*Response, int) {
	t.Helper()
	resp, err := Compute(req, w.now, w.opts)
	require.NoError(t, err)
	b, err := json.Marshal(resp)
	require.NoError(t, err)
	return resp, len(b)
}

// hugeMembers is a member list of n entries, each valid on its own (an ID and a peer URL of no
// ordinal): orphans, as many as fit in an annotation the API server accepts.
func hugeMembers(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%x","peerURL":"http://x%d:2380","started":true}`, i+1, i)
	}
	b.WriteByte(']')
	return b.String()
}

// A member's own token can patch its Lease: a member list of ~87k empty entries (under the API
// server's 256 KiB) made the removal rule run once per orphan over every voter, a 7 MB answer in 14 s.
// Now the list is distrusted whole, named in InputIgnored, and the answer is the answer without it.
func TestDistrustHugeMemberList(t *testing.T) {
	for name, list := range map[string]string{
		"87k empty entries":    "[" + strings.TrimSuffix(strings.Repeat("{},", 87000), ",") + "]",
		"3000 valid orphans":   hugeMembers(3000),
		"37 members, one over": hugeMembers(api.MaxReportedMembers + 1),
		"nested past depth":    strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.converge(60)
			_, normal := answerBytes(t, w.request(), w)
			req := w.request()
			for i := range 3 {
				editChild(t, req, wire.KeyLease, w.names().Lease(i), func(o map[string]any) { setAnnotation(o, api.AnnMembers, list) })
			}
			resp, size := answerBytes(t, req, w)
			require.Less(t, size, normal+normal/2, "the answer grew with the hand-edited list")
			w.status = *resp.Status
			require.Equal(t, "True/ImpossibleInput", w.condition(api.CondInputIgnored))
			require.Contains(t, resp.Status.Message+conditionMessage(*resp.Status, api.CondInputIgnored), api.AnnMembers)
			require.Equal(t, 3, renderedReplicas(t, resp), "no member list: nothing is removed or added")
		})
	}
}

// A list at the bound is read: the bound is not below what a real cluster reports.
func TestMemberListAtTheBoundIsRead(t *testing.T) {
	ms, err := api.ParseReport(map[string]string{api.AnnMembers: hugeMembers(api.MaxReportedMembers)})
	require.NoError(t, err)
	require.Len(t, ms.Members, api.MaxReportedMembers)
}

// Values beyond their bound in every place the hook reads strings from: a parent token annotation, a
// Lease's error, a ConfigMap record, a StatefulSet annotation, status lists. Each is ignored and named.
func TestDistrustValuesBeyondTheirBound(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	for name, tc := range map[string]struct {
		edit  func(t *testing.T, w *world, req *Request)
		named string
	}{
		"defrag-now token": {func(t *testing.T, w *world, req *Request) {
			var p map[string]any
			require.NoError(t, json.Unmarshal(req.Parent, &p))
			setAnnotation(p, api.AnnDefragNow, big)
			req.Parent = mustJSON(p)
		}, "EtcdCluster demo annotation " + api.AnnDefragNow},
		"agent error": {func(t *testing.T, w *world, req *Request) {
			editChild(t, req, wire.KeyLease, w.names().Lease(1), func(o map[string]any) { setAnnotation(o, api.AnnError, big) })
		}, "Lease demo-1-member annotation " + api.AnnError},
		"spec record": {func(t *testing.T, w *world, req *Request) {
			editChild(t, req, wire.KeyConfigMap, w.names().ConfigMap(), func(o map[string]any) {
				o["data"].(map[string]any)[api.ConfigKeySpec] = `{"size":3,"options":{"a":"` + big + `"}}`
			})
		}, "ConfigMap demo-config key " + api.ConfigKeySpec},
		"running versions": {func(t *testing.T, w *world, req *Request) {
			editChild(t, req, wire.KeyConfigMap, w.names().ConfigMap(), func(o map[string]any) {
				o["data"].(map[string]any)[api.ConfigKeyRunning] = strings.Repeat("3.5.0 ", 50000)
			})
		}, "ConfigMap demo-config key " + api.ConfigKeyRunning},
		"StatefulSet TLS switch": {func(t *testing.T, w *world, req *Request) {
			editChild(t, req, wire.KeyStatefulSet, w.name, func(o map[string]any) { setAnnotation(o, api.AnnTLSSwitch, big) })
		}, "StatefulSet demo annotation " + api.AnnTLSSwitch},
		"status members": {func(t *testing.T, w *world, req *Request) {
			var p map[string]any
			require.NoError(t, json.Unmarshal(req.Parent, &p))
			st := p["status"].(map[string]any)
			var ms []any
			for i := range 1000 {
				ms = append(ms, map[string]any{"name": fmt.Sprintf("demo-%d", i), "id": fmt.Sprintf("%x", i+1)})
			}
			st["members"] = ms
			req.Parent = mustJSON(p)
		}, "status.members"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.converge(60)
			_, normal := answerBytes(t, w.request(), w)
			req := w.request()
			tc.edit(t, w, req)
			resp, size := answerBytes(t, req, w)
			require.Less(t, size, normal+normal/2, "the answer grew with the value")
			require.Contains(t, conditionMessage(*resp.Status, api.CondInputIgnored), tc.named)
			require.Equal(t, 3, renderedReplicas(t, resp))
		})
	}
}

// renderedCommand is the etcd container's command of the rendered StatefulSet.
func renderedCommand(t *testing.T, resp *Response) string {
	t.Helper()
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] == "StatefulSet" {
			b, err := json.Marshal(m["spec"].(map[string]any)["template"])
			require.NoError(t, err)
			return string(b)
		}
	}
	t.Fatal("no StatefulSet rendered")
	return ""
}

// The spec the hook recorded in its ConfigMap is an input too (issue 24 §2): it was used without
// validation whenever the parent's spec was paused, invalid or waiting for a step. A record carrying
// --force-new-cluster was rendered and rolled; a recorded size of 100 rendered 100 replicas. Now a
// record that fails validation is ignored and named, and nothing it says is rendered.
func TestDistrustInvalidSpecRecord(t *testing.T) {
	for name, tc := range map[string]struct {
		record func(s *api.ClusterSpec)
		parent func(s *api.ClusterSpec)
	}{
		"force-new-cluster while paused": {
			record: func(s *api.ClusterSpec) { s.Options = map[string]string{"force-new-cluster": "true"} },
			parent: func(s *api.ClusterSpec) { s.Paused = true },
		},
		"size 100 under an invalid spec": {
			record: func(s *api.ClusterSpec) { s.Size = ptr(int32(100)) },
			parent: func(s *api.ClusterSpec) { s.Version = "not-a-version" },
		},
		"size 100000 while paused": {
			record: func(s *api.ClusterSpec) { s.Size = ptr(int32(100000)) },
			parent: func(s *api.ClusterSpec) { s.Paused = true },
		},
		"unsafe option without the opt-in under an invalid spec": {
			record: func(s *api.ClusterSpec) { s.Options = map[string]string{"unsafe-no-fsync": "true"} },
			parent: func(s *api.ClusterSpec) { s.Size = ptr(int32(0)) },
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.lastApplied = true // as Metacontroller annotates children: what an unchanged answer echoes
			w.converge(60)
			_, normal := answerBytes(t, w.request(), w)
			w.setSpec(tc.parent)
			req := w.request()
			editChild(t, req, wire.KeyConfigMap, w.names().ConfigMap(), func(o map[string]any) {
				data := o["data"].(map[string]any)
				var rec api.ClusterSpec
				require.NoError(t, json.Unmarshal([]byte(data[api.ConfigKeySpec].(string)), &rec))
				tc.record(&rec)
				data[api.ConfigKeySpec] = string(mustJSON(rec))
			})
			resp, size := answerBytes(t, req, w)
			require.Less(t, size, normal+normal/2)
			require.Contains(t, conditionMessage(*resp.Status, api.CondInputIgnored), "key spec.json is ignored: the recorded spec fails validation")
			require.Equal(t, 3, renderedReplicas(t, resp))
			cmd := renderedCommand(t, resp)
			require.NotContains(t, cmd, "force-new-cluster")
			require.NotContains(t, cmd, "unsafe-no-fsync")
			leases := 0
			for _, c := range resp.Children {
				if c.(map[string]any)["kind"] == "Lease" {
					leases++
				}
			}
			require.LessOrEqual(t, leases, api.MaxSize+1)
		})
	}
}

// A location's secrets reach no answer (issue 24 §5): the refusal of a destination, a restore source
// and the etcd.io/restore-from annotation quoted the URL whole, into conditions, status.message, the
// audit log and (for the annotation) the ConfigMap record, where it stayed after the annotation went.
func TestNoSecretInAnyAnswer(t *testing.T) {
	const secret = "s3cr3tKEY"
	for name, edit := range map[string]func(w *world){
		"destination with user info": func(w *world) {
			w.setSpec(func(s *api.ClusterSpec) {
				s.Backup = &api.BackupSpec{Destination: "s3://AKIA:" + secret + "@b/p", CredentialsSecret: "creds"}
			})
		},
		"destination with a signature": func(w *world) {
			w.setSpec(func(s *api.ClusterSpec) {
				s.Backup = &api.BackupSpec{Destination: "s3://b/p?X-Amz-Signature=" + secret, CredentialsSecret: "creds"}
			})
		},
		"restore-from with user info": func(w *world) {
			w.setSpec(func(s *api.ClusterSpec) {
				s.Backup = &api.BackupSpec{Destination: "s3://b/p", CredentialsSecret: "creds"}
			})
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://k:" + secret + "@b/p/latest"}
		},
		"restore-from with a fragment": func(w *world) {
			w.setSpec(func(s *api.ClusterSpec) {
				s.Backup = &api.BackupSpec{Destination: "s3://b/p", CredentialsSecret: "creds"}
			})
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://b/p/latest#" + secret}
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.lastApplied = true
			w.converge(60)
			edit(w)
			for n := range 4 { // the refusal, the record carried over syncs, then the annotation gone
				resp := w.step(5 * time.Second)
				b, err := json.Marshal(resp)
				require.NoError(t, err)
				require.NotContains(t, string(b), secret, "sync %d", n)
				if n == 1 {
					w.parentAnn = nil
				}
			}
		})
	}
}

// Every message written into status is bounded: a condition over the CRD's 32768 made the API server
// refuse the whole status write, and status froze.
func TestStatusMessagesAreBounded(t *testing.T) {
	// (The cut itself: render's TestBoundMessage.)
	w := newWorld(t, 3)
	w.converge(60)
	req := w.request()
	for i := range 3 {
		// Within the error's bound each, and many ignored inputs besides.
		editChild(t, req, wire.KeyLease, w.names().Lease(i), func(o map[string]any) {
			setAnnotation(o, api.AnnError, "WaitingForJoin: "+strings.Repeat("x", api.BoundText.Bytes-20))
			for k := range 40 {
				setAnnotation(o, fmt.Sprintf("etcd.io/x-%d", k), strings.Repeat("y", 2000))
			}
		})
	}
	resp, err := Compute(req, w.now, w.opts)
	require.NoError(t, err)
	require.LessOrEqual(t, len(resp.Status.Message), render.MaxMessageBytes)
	for _, c := range resp.Status.Conditions {
		require.LessOrEqual(t, len(c.Message), render.MaxMessageBytes, c.Type)
	}
	require.Contains(t, conditionMessage(*resp.Status, api.CondInputIgnored), "more bytes")
}

// onVersion is a settled 3-member cluster on version, its children carrying Metacontroller's last-applied.
func onVersion(t *testing.T, version string) *world {
	w := newWorld(t, 3)
	w.spec.Version = version
	w.lastApplied = true
	w.converge(60)
	return w
}

// setEtcdWaiting makes the etcd container of the request's pod named only (every pod when only is "")
// not ready and waiting for reason on image, after restarts restarts.
func setEtcdWaiting(t *testing.T, req *Request, only, image string, restarts int, reason string) {
	t.Helper()
	for k, raw := range req.Related[wire.KeyPod] {
		var pod map[string]any
		require.NoError(t, json.Unmarshal(raw, &pod))
		if only != "" && pod["metadata"].(map[string]any)["name"] != only {
			continue
		}
		pod["status"].(map[string]any)["containerStatuses"] = []any{map[string]any{
			"name": "etcd", "image": image, "imageID": "", "ready": false, "restartCount": restarts,
			"state": map[string]any{"waiting": map[string]any{"reason": reason}},
		}}
		req.Related[wire.KeyPod][k] = mustJSON(pod)
	}
}

// What the pods run is evidence (issue 24 §3): with every member restarting (no version reported),
// status wiped and the running-versions record gone, a spec asking 3.5 for data 3.6.16 wrote was
// accepted and rendered into the template. The images of the template and of the pods whose etcd ran
// refuse it; a patch below them (reverting a bad image) stays possible.
func TestImagesAreVersionEvidence(t *testing.T) {
	for name, tc := range map[string]struct {
		version string
		refused bool
	}{
		"a minor down":    {"3.5.21", true},
		"a patch down":    {"3.6.15", false},
		"the same":        {"3.6.16", false},
		"a minor up":      {"3.7.3", false},
		"two minors down": {"3.5.11", true},
	} {
		t.Run(name, func(t *testing.T) {
			w := onVersion(t, "3.6.16")
			w.status = api.ClusterStatus{}
			w.setSpec(func(s *api.ClusterSpec) { s.Version = tc.version })
			req := w.request()
			editChild(t, req, wire.KeyConfigMap, w.names().ConfigMap(), func(o map[string]any) {
				delete(o["data"].(map[string]any), api.ConfigKeyRunning)
			})
			for i := range 3 {
				editChild(t, req, wire.KeyLease, w.names().Lease(i), func(o map[string]any) { setAnnotation(o, api.AnnVersion, "") })
			}
			setEtcdWaiting(t, req, "", "quay.io/coreos/etcd:v3.6.16", 1, "CrashLoopBackOff")
			resp, err := Compute(req, w.now, w.opts)
			require.NoError(t, err)
			cmd := renderedCommand(t, resp)
			if tc.refused {
				require.Contains(t, conditionMessage(*resp.Status, api.CondInvalidSpec), "downgrades across a minor version")
				require.Contains(t, cmd, "etcd:v3.6.16", "the template keeps what the data was written by")
				return
			}
			require.NotContains(t, conditionMessage(*resp.Status, api.CondInvalidSpec), "downgrades across a minor version")
		})
	}
}

// The property over every key the hook reads from a member Lease (the agent's report and the hook's
// intent) and from its ConfigMap: a value one byte past its bound is ignored and named, and nothing of
// it reaches the answer.
func TestEveryReadKeyIsBounded(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	leaseKeys := []string{api.AnnIntent, api.AnnIntentSince, api.AnnJoinPermitted, api.AnnJoinDeadline, api.AnnBootstrap,
		api.AnnDefrag, api.AnnRenewal, api.AnnCARotation, api.AnnCARestart, api.AnnPeerScheme}
	for k := range (api.Report{}).Annotations() {
		leaseKeys = append(leaseKeys, k)
	}
	marker := func(n int) string { return "Q" + strings.Repeat("z", n) }
	for _, k := range leaseKeys {
		req := w.request()
		v := marker(api.AnnotationBound(k).Bytes)
		editChild(t, req, wire.KeyLease, w.names().Lease(1), func(o map[string]any) { setAnnotation(o, k, v) })
		resp, err := Compute(req, w.now, w.opts)
		require.NoError(t, err, k)
		b, _ := json.Marshal(resp)
		require.NotContains(t, string(b), v[:200], k)
		require.Contains(t, conditionMessage(*resp.Status, api.CondInputIgnored), "annotation "+k+" is ignored", k)
	}
	for _, k := range []string{api.ConfigKeySpec, api.ConfigKeyRestoreInPlace, api.ConfigKeyRunning, api.ConfigKeyClusterID,
		api.ConfigKeyRollingTo, api.ConfigKeyDefragNowDone, api.ConfigKeyBootstrapped, api.ConfigKeyFormed} {
		req := w.request()
		v := marker(api.ConfigBound(k).Bytes)
		editChild(t, req, wire.KeyConfigMap, w.names().ConfigMap(), func(o map[string]any) { o["data"].(map[string]any)[k] = v })
		resp, err := Compute(req, w.now, w.opts)
		require.NoError(t, err, k)
		b, _ := json.Marshal(resp)
		require.NotContains(t, string(b), v[:200], k)
		require.Contains(t, conditionMessage(*resp.Status, api.CondInputIgnored), "key "+k+" is ignored", k)
	}
}

// A record an older hook wrote under looser rules (here an @every schedule, refused since) is not
// rendered from, but a fixed spec is still judged against it: its defaults (a cluster recorded
// without a NetworkPolicy keeps none) and its immutable fields (storage) hold.
func TestRecordFailingNewerRulesStillBindsChanges(t *testing.T) {
	w := newWorld(t, 3)
	w.lastApplied = true
	w.converge(60)
	req := w.request()
	editChild(t, req, wire.KeyConfigMap, w.names().ConfigMap(), func(o map[string]any) {
		data := o["data"].(map[string]any)
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(data[api.ConfigKeySpec].(string)), &rec))
		rec["maintenance"].(map[string]any)["defrag"] = map[string]any{"schedule": "@every 1h"}
		rec["network"] = map[string]any{"policy": false}
		data[api.ConfigKeySpec] = string(mustJSON(rec))
	})
	var parent map[string]any
	require.NoError(t, json.Unmarshal(req.Parent, &parent))
	spec := parent["spec"].(map[string]any)
	delete(spec, "network") // unset: the record's off stays off
	spec["storage"] = map[string]any{"size": "10Gi", "storageClassName": "another"}
	req.Parent = mustJSON(parent)
	resp, err := Compute(req, w.now, w.opts)
	require.NoError(t, err)
	require.Contains(t, conditionMessage(*resp.Status, api.CondInputIgnored), "the recorded spec fails validation")
	require.Contains(t, conditionMessage(*resp.Status, api.CondInvalidSpec), "spec.storage: only size may change")

	spec["storage"] = map[string]any{"size": "10Gi"}
	req.Parent = mustJSON(parent)
	resp, err = Compute(req, w.now, w.opts)
	require.NoError(t, err)
	require.Empty(t, conditionMessage(*resp.Status, api.CondInvalidSpec))
	for _, c := range resp.Children {
		require.NotEqual(t, "NetworkPolicy", c.(map[string]any)["kind"], "the record said no policy: an unset field keeps it off")
	}
}

// An upgrade whose image never started (pull refused) can be set back: only images a pod's etcd ran
// are evidence, not the template the hook asked for.
func TestImageThatNeverRanIsNoEvidence(t *testing.T) {
	w := onVersion(t, "3.6.16")
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
	req := w.request()
	editChild(t, req, wire.KeyStatefulSet, w.name, func(o map[string]any) {
		c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["image"] = "quay.io/coreos/etcd:v3.7.0"
	})
	setEtcdWaiting(t, req, w.names().Pod(2), "quay.io/coreos/etcd:v3.7.0", 0, "ImagePullBackOff")
	resp, err := Compute(req, w.now, w.opts)
	require.NoError(t, err)
	require.NotContains(t, conditionMessage(*resp.Status, api.CondInvalidSpec), "downgrades across a minor version")
}

// The etcd.io/restore-from annotation is read with spec.backup's credentials: without a Secret there,
// an s3:// or gs:// source would be read with the node's, which needs the explicit opt-in.
func TestRestoreFromNeedsCredentialsOrTheOptIn(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(func(s *api.ClusterSpec) {
		s.Backup = &api.BackupSpec{Destination: "file:///backups", VolumeClaimName: "backups"}
	})
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://other-bucket/prod/demo/latest"}
	resp := w.step(5 * time.Second)
	require.Contains(t, conditionMessage(*resp.Status, api.CondRestoreFailed), "spec.backup.credentialsSecret is required for s3://")
	require.Nil(t, resp.Status.Restore, "nothing started")
}
