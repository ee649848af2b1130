// libpq, PostgreSQL's C client (apt libpq-dev, pkg-config libpq): connections, the extended query protocol,
// pipeline mode and cancel requests. The shim exists so SwiftPM finds the header through pkg-config
// (it lives in /usr/include/postgresql on Debian) and so Swift sees the diagnostic field codes, which are
// character-literal macros.
#include <libpq-fe.h>

/// The severity, never translated: ERROR, FATAL, PANIC, ...
static inline int clibpq_diag_severity(void) { return PG_DIAG_SEVERITY_NONLOCALIZED; }
/// The five-character SQLSTATE code.
static inline int clibpq_diag_sqlstate(void) { return PG_DIAG_SQLSTATE; }
/// The server's primary message.
static inline int clibpq_diag_message(void) { return PG_DIAG_MESSAGE_PRIMARY; }
/// The server's detail message.
static inline int clibpq_diag_detail(void) { return PG_DIAG_MESSAGE_DETAIL; }
/// The server's hint.
static inline int clibpq_diag_hint(void) { return PG_DIAG_MESSAGE_HINT; }
/// The violated constraint's name.
static inline int clibpq_diag_constraint(void) { return PG_DIAG_CONSTRAINT_NAME; }
