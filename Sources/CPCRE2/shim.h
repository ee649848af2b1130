// PCRE2 (apt libpcre2-dev, pkg-config libpcre2-8): Perl-compatible regular expressions whose matching
// is bounded (match, depth and heap limits) and can be stopped from a callout. The shim exists because
// pcre2.h needs the code unit width defined before it is included; Swift calls the `_8` functions
// (the unsuffixed names are function-like macros, which Swift does not import).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
