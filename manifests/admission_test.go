package manifests

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// celValidator compiles every x-kubernetes-validations rule of the CRD with the API server's own
// library, as the API server does when the CRD is applied: a rule that does not compile fails here,
// not at install.
func celValidator(t *testing.T) *cel.Validator {
	t.Helper()
	v1 := loadCRD(t)
	var internal apiextensions.JSONSchemaProps
	require.NoError(t, apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &internal, nil))
	s, err := schema.NewStructural(&internal)
	require.NoError(t, err)
	v := cel.NewValidator(s, true, celconfig.PerCallLimit)
	require.NotNil(t, v, "the CRD declares CEL rules")
	return v
}

// admit runs the CRD's CEL rules on an EtcdCluster spec (a create: no old object).
func admit(t *testing.T, v *cel.Validator, spec map[string]any) field.ErrorList {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdCluster",
		"metadata": map[string]any{"name": "demo", "namespace": "prod"},
		"spec":     spec,
	}
	errs, _ := v.Validate(context.Background(), field.NewPath(""), nil, obj, nil, celconfig.RuntimeCELCostBudget)
	return errs
}

// Rules issue 24 §4 and §8 moved into the CRD, so kubectl refuses them at once (the hook keeps its own
// check: the CRD may be older than the hook). The real API server runs the same library.
func TestCRDRefusesAtAdmission(t *testing.T) {
	v := celValidator(t)
	for name, tc := range map[string]struct {
		spec map[string]any
		want string // "" = admitted
	}{
		"a plain spec": {map[string]any{"size": int64(3)}, ""},
		"backup @every": {map[string]any{"backup": map[string]any{"destination": "s3://b/p", "schedule": "@every 1s"}},
			"@every is not accepted"},
		"backup @daily":      {map[string]any{"backup": map[string]any{"destination": "s3://b/p", "schedule": "@daily"}}, ""},
		"backup five fields": {map[string]any{"backup": map[string]any{"destination": "s3://b/p", "schedule": "*/5 * * * *"}}, ""},
		"backup claim of member 0": {map[string]any{"backup": map[string]any{"destination": "file:///b", "volumeClaimName": "data-demo-0"}},
			"a member's data claim"},
		"backup credentials the CA": {map[string]any{"backup": map[string]any{"destination": "s3://b/p", "credentialsSecret": "demo-ca"}},
			"etcdhook owns"},
		"restore claim of member 1": {map[string]any{"restore": map[string]any{"from": "file:///b/latest", "volumeClaimName": "data-demo-1"}},
			"a member's data claim"},
		"TLS client Secret the built-in one": {map[string]any{"security": map[string]any{"tls": map[string]any{"client": map[string]any{"secretName": "demo-client-tls"}}}},
			"etcdhook owns"},
		"a Lease's name as credentials (another kind: no collision)": {map[string]any{"backup": map[string]any{"destination": "s3://b/p", "credentialsSecret": "demo-2-member"}}, ""},
		"a peer Secret named like the peer Service (the sample's)":   {map[string]any{"security": map[string]any{"tls": map[string]any{"peer": map[string]any{"secretName": "demo-peer"}}}}, ""},
		"a claim of its own":                {map[string]any{"backup": map[string]any{"destination": "file:///b", "volumeClaimName": "data-demo-backups"}}, ""},
		"a claim of ordinal 12 (no member)": {map[string]any{"backup": map[string]any{"destination": "file:///b", "volumeClaimName": "data-demo-12"}}, ""},
		"version below the minimum":         {map[string]any{"version": "3.5.10"}, "spec.version must be 3.5.11 or newer"},
		"version 3.4":                       {map[string]any{"version": "3.4.30"}, "spec.version must be"},
		"version 3.8":                       {map[string]any{"version": "3.8.0"}, "spec.version must be"},
		"version 3.5.11":                    {map[string]any{"version": "3.5.11"}, ""},
		"version 3.5.100":                   {map[string]any{"version": "3.5.100"}, ""},
		"version 3.6.0":                     {map[string]any{"version": "3.6.0"}, ""},
		"version 3.7.3":                     {map[string]any{"version": "3.7.3"}, ""},
		"negative storage":                  {map[string]any{"storage": map[string]any{"size": "-1Gi"}}, "positive quantity"},
		"zero storage":                      {map[string]any{"storage": map[string]any{"size": "0"}}, "positive quantity"},
		"zero storage as a number":          {map[string]any{"storage": map[string]any{"size": int64(0)}}, "positive quantity"},
		"storage 10Gi":                      {map[string]any{"storage": map[string]any{"size": "10Gi"}}, ""},
		"storage as a number":               {map[string]any{"storage": map[string]any{"size": int64(1 << 30)}}, ""},
		"unknown destination scheme": {map[string]any{"backup": map[string]any{"destination": "azblob://c/p"}},
			"a destination is s3://"},
		"unknown restore scheme":               {map[string]any{"restore": map[string]any{"from": "http://x/latest"}}, "a restore source is"},
		"a standby":                            {map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main/latest?region=eu-west-1", "credentialsSecret": "creds"}}, ""},
		"a standby of a snapshot":              {map[string]any{"standby": map[string]any{"from": "gs://b/p/prod/main/20250101T000000Z-r42.db"}}, ""},
		"a standby of a file source":           {map[string]any{"standby": map[string]any{"from": "file:///b/prod/main/latest"}}, "a standby follows"},
		"a standby of a folder without latest": {map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main"}}, "a standby follows"},
		"standby and restore": {map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main/latest"}, "restore": map[string]any{"from": "s3://b/p/latest"}},
			"spec.standby and spec.restore are exclusive"},
		"standby on emptyDir": {map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main/latest"}, "storage": map[string]any{"emptyDir": map[string]any{}}},
			"spec.standby needs volumes"},
		"standby without TLS": {map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main/latest"}, "security": map[string]any{"tls": map[string]any{"enabled": false}}},
			"spec.standby needs TLS"},
		"standby credentials the CA": {map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main/latest", "credentialsSecret": "demo-ca"}},
			"etcdhook owns"},
		"defrag @every": {map[string]any{"maintenance": map[string]any{"defrag": map[string]any{"schedule": "@every 8760h"}}},
			"@every is not accepted"},
	} {
		errs := admit(t, v, tc.spec)
		if tc.want == "" {
			require.Empty(t, errs, name)
			continue
		}
		require.NotEmpty(t, errs, name)
		require.Contains(t, errs.ToAggregate().Error(), tc.want, name)
	}
}

// The API server's own validation of the CRD object, cost estimates of every CEL rule included: a rule
// too costly (an unbounded string matched against a pattern) is refused when the CRD is applied.
func TestCRDPassesTheAPIServersValidation(t *testing.T) {
	b, err := os.ReadFile("crd.yaml")
	require.NoError(t, err)
	var v1 apiextv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(b, &v1))
	var crd apiextensions.CustomResourceDefinition
	require.NoError(t, apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil))
	crd.Status.StoredVersions = []string{v1.Spec.Versions[0].Name} // as the API server keeps it
	errs := validation.ValidateCustomResourceDefinition(context.Background(), &crd)
	require.Empty(t, errs, "%v", errs.ToAggregate())
}
