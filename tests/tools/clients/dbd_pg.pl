#!/usr/bin/perl
# Perl DBI + DBD::Pg against the proxy (tests/tools/test_perl.py). Prints one JSON object.
# Usage: dbd_pg.pl HOST PORT DATABASE USER PASSWORD
use strict;
use warnings;
use DBI;
use JSON::PP;

my ($host, $port, $db, $user, $password) = @ARGV;
my %out;
my $dbh = DBI->connect("dbi:Pg:dbname=$db;host=$host;port=$port", $user, $password,
                       {AutoCommit => 0, RaiseError => 0, PrintError => 0, PrintWarn => 0});
die DBI->errstr unless $dbh;
$out{version} = "$DBD::Pg::VERSION";

sub failure { my ($what) = @_; push @{$out{errors}}, "$what: " . ($dbh->state // '') . " " . ($dbh->errstr // ''); }

# 1. a grouped count (simple query)
my $rows = $dbh->selectall_arrayref("SELECT sex, count(*) AS n FROM adult GROUP BY sex");
if ($rows) { $out{grouped} = {map { $_->[0] => $_->[1] + 0 } @$rows}; } else { failure("grouped"); }
$dbh->commit;

# 2. a prepared statement with a placeholder, executed three times: DBD::Pg prepares it on
# the server by name (dbdpg_p<pid>_<n>) from the second execution on; freeing the handle then
# makes DBD::Pg send SQL "DEALLOCATE dbdpg_p…" itself, inside the open transaction. The
# transaction wrote a row; its COMMIT must really commit.
$dbh->do("INSERT INTO tools_commit_check (tag) VALUES ('dbd-pg')") or failure("insert");
my $sth = $dbh->prepare("SELECT count(*) FROM adult WHERE age > ?");
for my $age (40, 40, 50) {
    if ($sth->execute($age)) {
        my ($n) = $sth->fetchrow_array;
        push @{$out{prepared}}, [$age, defined $n ? $n + 0 : undef];
    } else {
        failure("prepared $age");
    }
}
$out{prepare_name} = $sth->{pg_prepare_name};
$sth->finish;
undef $sth;    # DESTROY: DEALLOCATE
$out{deallocate_error} = $dbh->errstr if $dbh->err;
$out{commit} = $dbh->commit ? JSON::PP::true : JSON::PP::false;
$out{commit_error} = $dbh->errstr if $dbh->err;

# 3. row access: refused with 42501
my $rows_sth = $dbh->prepare("SELECT * FROM adult");
if ($rows_sth->execute) { $out{rows} = "answered"; } else { $out{rows_sqlstate} = $dbh->state; }
$dbh->rollback;

# 4. the tables, as every DBI tool lists them (DBD::Pg reads pg_class.tableoid)
my $tables = $dbh->table_info(undef, "public", "%", "TABLE");
if ($tables && !$dbh->err) {
    $out{tables} = [map { $_->{TABLE_NAME} } @{$tables->fetchall_arrayref({})}];
} else {
    failure("table_info");
}
$dbh->rollback;

# 5. still usable afterwards
($out{after}) = $dbh->selectrow_array("SELECT 1");
$dbh->rollback;
$dbh->disconnect;
print JSON::PP->new->canonical->encode(\%out), "\n";
