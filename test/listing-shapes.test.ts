/**
 * Issue 14.8: an empty CSV listing still has its header row, and an XML people listing
 * has one <Person> per record directly inside <People> (no <People> in <People>), or
 * the "No people found" text in <Message>.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'

const header = 'Id,Emp_Id,Created,Deleted,Parent,Custno,DispGroup,Source_Id,Location,Email,FirstName,LastName,NickName,Phone,Web,Photo,Gender,Dept,Title,Birthday,HireDate,TermDate,Skip,DateLast,DateEdit'

t.test('people listings: the CSV header with no one found, one <Person> per record in XML', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const emptyCsv = await service.call('GET', '/People/Read/Missing?format=csv')
    t.equal(emptyCsv.status, 200)
    t.match(emptyCsv.headers.get('content-type'), /^text\/csv/)
    t.equal(emptyCsv.text, header + '\r\n', 'only the header row')
    t.equal(emptyCsv.headers.get('x-total-count'), '0')
    const emptyListCsv = await service.call('POST', '/people/read/list?format=csv', { body: {} })
    t.equal(emptyListCsv.text, header + '\r\n')

    const emptyXml = await service.call('GET', '/People/Read/Missing?format=xml')
    t.equal(emptyXml.status, 200)
    t.match(emptyXml.text, /<People>\s*<Total>0<\/Total>\s*<Page>1 of 1<\/Page>/)
    t.notMatch(emptyXml.text, /<Person>/)
    t.match(emptyXml.text, /<Message>No people found<\/Message>\s*<\/People>/, 'the text of interface 4.5, not dropped')
    t.equal(emptyXml.text.match(/<People>/g)?.length, 1, 'one <People> element')
    const emptyJson = await service.call('GET', '/People/Read/Missing?format=json')
    t.equal(emptyJson.json.People, 'No people found', 'JSON stays as it was')

    for (const [first, last] of [['Ada', 'Lovelace'], ['Alan', 'Turing']]) {
      const made = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: first, LastName: last } })
      t.equal(made.status, 200, made.text)
    }
    const xml = await service.call('GET', '/People/Read/Missing?format=xml')
    t.equal(xml.text.match(/<People>/g)?.length, 1, 'no <People> inside <People>')
    t.equal(xml.text.match(/<Person>/g)?.length, 2, 'one <Person> per record')
    t.match(xml.text, /^<\?xml version="1\.0" encoding="UTF-8"\?>\s*<People>\s*<Total>2<\/Total>\s*<Page>1 of 1<\/Page>\s*<Sort>LastName,FirstName<\/Sort>\s*<Filter\/?>(<\/Filter>)?\s*<Person>\s*<Id>\d+<\/Id>[\s\S]*<LastName>Lovelace<\/LastName>[\s\S]*<\/Person>\s*<Person>[\s\S]*<LastName>Turing<\/LastName>[\s\S]*<\/Person>\s*<\/People>$/)
    const csv = await service.call('GET', '/People/Read/Missing?format=csv')
    t.equal(csv.text.split('\r\n')[0], header)
    t.equal(csv.text.split('\r\n').length, 3)
  }))
