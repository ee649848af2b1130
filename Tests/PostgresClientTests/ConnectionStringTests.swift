import PostgresClient
import Testing

@Suite struct ConnectionStringTests {
    @Test func aKeywordStringIsPrintedWithItsPasswordRedacted() throws {
        let cs = try ConnectionString("host=db.example port=5433 dbname=line user=station password=hunter2-secret sslmode=verify-full")
        #expect(!cs.description.contains("hunter2"))
        #expect(cs.description.contains("password=***"))
        #expect(cs.description.contains("host=db.example"))
        #expect(cs.option("sslmode") == "verify-full")
        #expect(cs.option("password") == "***")
    }

    @Test func aURIIsPrintedWithoutTheUserInformationPassword() throws {
        let cs = try ConnectionString("postgresql://station:hunter2-secret@db.example:5433/line?sslmode=require&application_name=st1")
        #expect(!cs.description.contains("hunter2"))
        #expect(cs.option("user") == "station")
        #expect(cs.option("port") == "5433")
        #expect(cs.option("dbname") == "line")
        #expect(cs.option("application_name") == "st1")
    }

    @Test func aPasswordInTheQueryStringAndAKeyPassphraseAreRedacted() throws {
        let cs = try ConnectionString("postgresql://db.example/line?password=hunter2-secret&sslpassword=keypass-secret")
        #expect(!cs.description.contains("hunter2"))
        #expect(!cs.description.contains("keypass"))
    }

    @Test func anUnparseableStringIsAnErrorThatDoesNotQuoteIt() {
        for text in ["host=db password='hunter2-secret", "postgresql://station:hunter2-secret@[db/x", "hunter2-secret", "nosuchoption=hunter2-secret"] {
            do {
                _ = try ConnectionString(text)
                Issue.record("\(text.count)-character string parsed")
            } catch {
                #expect(error.kind == .invalidConnectionString)
                #expect(!"\(error)".contains("hunter2"))
            }
        }
    }

    @Test func anEmptyStringMeansLibpqDefaults() throws {
        #expect(try ConnectionString("").description == "(libpq defaults)")
    }

    @Test func valuesWithSpacesAreQuotedWhenPrinted() throws {
        let cs = try ConnectionString("host=db application_name='station one'")
        #expect(cs.description.contains("application_name='station one'"))
    }
}
