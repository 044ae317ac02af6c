# Ruby pg against the proxy (tests/tools/test_ruby.py). Prints one JSON object: one entry per
# step, or "<step>_error" with the exception when the step failed.
# Usage: ruby ruby_pg.rb HOST PORT DATABASE USER PASSWORD
require 'pg'
require 'json'

host, port, db, user, password = ARGV
out = { 'version' => PG::VERSION, 'notices' => [] }
c = PG.connect(host: host, port: port, dbname: db, user: user, password: password)
c.set_notice_receiver { |r| out['notices'] << r.error_field(PG::Result::PG_DIAG_MESSAGE_PRIMARY) }

step = lambda do |name, &block|
  out[name] = block.call
rescue PG::Error => e
  out["#{name}_error"] = "#{e.class.name}: #{e.message.strip}"
  c.exec('ROLLBACK') if c.transaction_status == PG::PQTRANS_INERROR
end

# simple protocol
step.call('grouped') { c.exec('SELECT sex, count(*) AS n FROM adult GROUP BY sex').values }
# extended protocol, unnamed statement, text parameters
step.call('params') do
  c.exec_params('SELECT count(*) FROM adult WHERE age > $1 AND sex = $2', [40, 'Male']).values
end
# a named prepared statement, executed twice with different values, then freed with SQL
step.call('prepared') do
  c.prepare('mean_age', 'SELECT count(*) AS n, avg(age) AS mean_age FROM adult WHERE income = $1')
  ['<=50K', '>50K'].map { |v| [v] + c.exec_prepared('mean_age', [v]).values[0] }
end
step.call('deallocate') { c.exec('DEALLOCATE mean_age').cmd_status }
# typed results (the basic type map: int8 -> Integer)
step.call('typed') do
  typed = PG::BasicTypeMapForResults.new(c)
  r = c.exec("SELECT count(*) AS n FROM adult WHERE sex = 'Female'")
  r.type_map = typed
  v = r.values[0][0]
  [v, v.class.name]
end
# row access
step.call('rows') do
  c.exec('SELECT * FROM adult')
  'answered'
rescue PG::Error => e
  [e.class.name, e.result&.error_field(PG::Result::PG_DIAG_SQLSTATE)]
end
step.call('after') { c.exec('SELECT 1 AS one').values }
c.close
puts JSON.generate(out)
