package graphapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// fragmentBomb is a query of n fragments, each spreading the next twice: about 50 bytes a
// fragment, and 2^n paths through them for a walk that does not remember fragments.
func fragmentBomb(n int) string {
	var b strings.Builder
	b.WriteString(`query { jobs(pageSize: 1) { content { ...F0 } } }`)
	for i := range n {
		fmt.Fprintf(&b, "\nfragment F%d on DataJob { jobName ...F%d ...F%d }", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "\nfragment F%d on DataJob { jobName }", n)
	return b.String()
}

func TestAFragmentBombIsRefusedBeforeItRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := fragmentBomb(40)
	require.Less(t, len(q), 2100, "a 2 KB query")
	e.stmts.take()
	r := e.query(q, "")
	msg := r.errorMessage(t, http.StatusBadRequest)
	require.Contains(t, msg, "fragment")
	require.Empty(t, e.stmts.take(), "no database work")
}

func TestDeepIntrospectionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := `{ __type(name: "DataJob") { ` + strings.Repeat(`ofType { `, 30) + `name` + strings.Repeat(` }`, 30) + ` } }`
	r := e.query(q, "")
	require.Contains(t, r.errorMessage(t, http.StatusBadRequest), "nested 32 fields deep, more than the maximum of 15")
}

func TestTheStandardIntrospectionQueryIsAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.query(introspectionQuery, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.Data), `"queryType":{"name":"Query"}`)
}

func TestIntrospectionCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.cfg.DisableIntrospection = true })
	r := e.query(`{ __schema { queryType { name } } }`, "")
	require.Contains(t, r.errorMessage(t, http.StatusBadRequest), "introspection disabled")
	// Type names are not introspection of the schema: they stay.
	r = e.query(`{ jobs { __typename totalItems } }`, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func TestRootFieldsAndAliasesAreCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var q strings.Builder
	q.WriteString("{")
	for i := range 6 {
		fmt.Fprintf(&q, " a%d: jobs { totalItems }", i)
	}
	q.WriteString(" }")
	e.stmts.take()
	r := e.query(q.String(), "")
	require.Contains(t, r.errorMessage(t, http.StatusBadRequest), "6 root fields, more than the maximum of 5")
	require.Empty(t, e.stmts.take(), "no database work")
	r = e.query(`{ a: jobs { totalItems } b: jobs { totalItems } }`, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func TestAQueryPastItsDeadlineAnswers503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.cfg.Timeout = 200 * time.Millisecond })
	// A transaction of the test holds the job table: the query waits until its deadline.
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE data_job IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	r := e.query(`{ jobs { totalItems } }`, "")
	require.Contains(t, r.errorMessage(t, http.StatusServiceUnavailable), "did not complete in time")
}

// introspectionQuery is the one GraphQL tools (graphql-js getIntrospectionQuery) send.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
}`
